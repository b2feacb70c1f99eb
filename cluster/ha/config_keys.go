package ha

import (
	"errors"
	"strings"

	"github.com/sluicehq/sluice/config"
)

// The high-availability.* keys. Package cluster reads them into its
// Config (a job's role and how its processes find each other); Set takes
// them and the ones only Config has.
var (
	// KeyType turns HA on (etcd) or off (none); etcd when
	// high-availability.etcd.endpoints is set.
	KeyType = config.Enum("high-availability.type", "none or etcd; etcd needs high-availability.etcd.endpoints.",
		parseType, "none", "etcd").DeprecatedKeys("high-availability")
	// KeyEndpoints are etcd's client URLs.
	KeyEndpoints = config.List("high-availability.etcd.endpoints",
		"etcd's client URLs (http://10.0.0.1:2379); setting them turns HA on.").Check(func(eps []string) error {
		if len(eps) == 0 {
			return errors.New("no endpoint")
		}
		return nil
	})
	// KeyPathRoot is the root of the job's keys in etcd.
	KeyPathRoot = config.String("high-availability.etcd.path.root", "The root of the jobs' keys in etcd.").Default(DefaultPrefix)
	// KeyLeaseDuration is a leader's lease.
	KeyLeaseDuration = config.Duration("high-availability.etcd.lease-duration",
		"A leader's lease: how long a leader that stopped answering keeps its leadership.").Default(DefaultSessionTTL)
	// KeyUsername and KeyPassword authenticate with etcd.
	KeyUsername = config.String("high-availability.etcd.username", "etcd's user, with high-availability.etcd.password.")
	KeyPassword = config.String("high-availability.etcd.password", "The password of high-availability.etcd.username.").Sensitive()
	// KeyTLSCA, KeyTLSCert and KeyTLSKey are etcd's TLS, PEM files.
	KeyTLSCA = config.String("high-availability.etcd.tls.ca",
		"A PEM file of the CA of etcd's certificate, for https endpoints; unset: the system's roots.")
	KeyTLSCert = config.String("high-availability.etcd.tls.cert",
		"A PEM client certificate for an etcd that asks for one, with high-availability.etcd.tls.key.")
	KeyTLSKey = config.String("high-availability.etcd.tls.key", "The PEM key of high-availability.etcd.tls.cert.")
)

// parseType reads high-availability.type: whether HA is on.
func parseType(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "none", "":
		return false, nil
	case "etcd":
		return true, nil
	case "zookeeper", "kubernetes":
		return false, errors.New("high availability is on etcd in Sluice: want etcd or none")
	}
	return false, errors.New("want etcd or none")
}
