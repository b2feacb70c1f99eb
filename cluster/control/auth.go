package control

import (
	"context"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/peerauth"
)

// peerCreds are gRPC's transport credentials over a peerauth
// Authenticator: every connection of the control plane is authenticated
// (and encrypted) before gRPC reads or writes a byte of it, so a stranger
// never reaches a stream.
type peerCreds struct{ a *peerauth.Authenticator }

// authInfo is what a connection's peer proved.
type authInfo struct {
	credentials.CommonAuthInfo
	id peerauth.Identity
}

func (authInfo) AuthType() string { return "sluice-peerauth" }

func (c peerCreds) ClientHandshake(ctx context.Context, _ string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, id, err := c.a.Client(ctx, raw)
	if err != nil {
		return nil, nil, err
	}
	return conn, authInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, id: id}, nil
}

func (c peerCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, id, err := c.a.Server(context.Background(), raw)
	if err != nil {
		return nil, nil, err
	}
	return conn, authInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, id: id}, nil
}

func (c peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "sluice-peerauth"}
}

func (c peerCreds) Clone() credentials.TransportCredentials { return c }

func (c peerCreds) OverrideServerName(string) error { return nil }

// peerIdentity is what the stream's connection proved ("" principal
// without authentication).
func peerIdentity(info credentials.AuthInfo) peerauth.Identity {
	if ai, ok := info.(authInfo); ok {
		return ai.id
	}
	return peerauth.Identity{}
}
