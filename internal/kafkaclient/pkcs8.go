package kafkaclient

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// Encrypted PKCS#8 (RFC 5958) with PBES2 (RFC 8018): what `openssl pkcs8
// -topk8 -v2 ...` and OpenSSL 3's defaults write, and the form Kafka
// requires of an encrypted PEM key. Go's standard library parses only
// unencrypted PKCS#8.

var (
	oidPBES2  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}

	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}

	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

type encryptedPrivateKeyInfo struct {
	Algorithm     algorithmIdentifier
	EncryptedData []byte
}

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type pbes2Params struct {
	KeyDerivationFunc algorithmIdentifier
	EncryptionScheme  algorithmIdentifier
}

type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLength      int                 `asn1:"optional"`
	PRF            algorithmIdentifier `asn1:"optional"`
}

// errWrongPassword is what a wrong password most often gives: the
// decrypted padding is not valid.
var errWrongPassword = errors.New("wrong password (or a corrupt key)")

// decryptPKCS8 decrypts the DER of an ENCRYPTED PRIVATE KEY block and
// returns the DER of the PKCS#8 PrivateKeyInfo inside.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("not an encrypted PKCS#8 key: %v", err)
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encryption %v is not PBES2: re-encrypt with `openssl pkcs8 -topk8 -v2 aes-256-cbc`", info.Algorithm.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("PBES2 parameters: %v", err)
	}
	if !params.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("key derivation %v is not PBKDF2 (scrypt is not supported)", params.KeyDerivationFunc.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("PBKDF2 parameters: %v", err)
	}
	if kdf.IterationCount < 1 || kdf.IterationCount > 1<<24 {
		return nil, fmt.Errorf("PBKDF2 iteration count %d out of range", kdf.IterationCount)
	}
	prf := func() hash.Hash { return sha1.New() } // the default
	switch p := kdf.PRF.Algorithm; {
	case len(p) == 0 || p.Equal(oidHMACSHA1):
	case p.Equal(oidHMACSHA224):
		prf = sha256.New224
	case p.Equal(oidHMACSHA256):
		prf = sha256.New
	case p.Equal(oidHMACSHA384):
		prf = sha512.New384
	case p.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("PBKDF2 pseudo-random function %v is not supported", p)
	}
	var keyLen int
	var newCipher func([]byte) (cipher.Block, error)
	switch s := params.EncryptionScheme.Algorithm; {
	case s.Equal(oidAES128CBC):
		keyLen, newCipher = 16, aes.NewCipher
	case s.Equal(oidAES192CBC):
		keyLen, newCipher = 24, aes.NewCipher
	case s.Equal(oidAES256CBC):
		keyLen, newCipher = 32, aes.NewCipher
	case s.Equal(oidDESEDE3CBC):
		keyLen, newCipher = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("cipher %v is not supported (AES-CBC or DES-EDE3-CBC are)", s)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, fmt.Errorf("PBKDF2 key length %d does not fit the cipher (%d)", kdf.KeyLength, keyLen)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.EncryptionScheme.Parameters.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("cipher IV: %v", err)
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.IterationCount, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := newCipher(key)
	if err != nil {
		return nil, err
	}
	bs := block.BlockSize()
	if len(iv) != bs {
		return nil, fmt.Errorf("cipher IV of %d bytes, want %d", len(iv), bs)
	}
	data := info.EncryptedData
	if len(data) == 0 || len(data)%bs != 0 {
		return nil, errors.New("encrypted data is not a whole number of cipher blocks")
	}
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, data)
	// PKCS#7 padding.
	n := int(out[len(out)-1])
	if n < 1 || n > bs {
		return nil, errWrongPassword
	}
	for _, b := range out[len(out)-n:] {
		if int(b) != n {
			return nil, errWrongPassword
		}
	}
	out = out[:len(out)-n]
	// A wrong password can leave valid padding by chance: the result must
	// then still be DER.
	var probe asn1.RawValue
	if rest, err := asn1.Unmarshal(out, &probe); err != nil || len(rest) > 0 {
		return nil, errWrongPassword
	}
	return out, nil
}
