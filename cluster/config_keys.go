package cluster

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cluster/ha"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime/network"
)

// The keys of a process's role, how the processes of a job find each
// other and how they authenticate each other (Config.Security, which
// package peerauth sets up; the names are peerauth's). Config also takes
// the keys other packages declare for it: the high-availability.* keys
// are package ha's, the data plane's bounds (Config.DataLimits) package
// network's. Config.Set takes them one by one, FromConfiguration reads
// them.
var (
	keyRole = config.Enum("cluster.role", "This process's role: coordinator, worker, or single (the whole job in this process).",
		ParseRole, "single", "coordinator", "worker")
	keyRPCAddress = config.String("jobmanager.rpc.address", "The coordinator's host (host:port, or with jobmanager.rpc.port), for workers.")
	keyRPCPort    = config.Int("jobmanager.rpc.port", "The coordinator's control port; it listens on it.").
			Default(DefaultRPCPort).Check(config.Between(0, 65535))
	keyHost = config.String("taskmanager.host", "The host name or IP other processes reach this one at.").
		DefaultText("the listen address's host, else the machine's host name")
	keyResourceID = config.String("taskmanager.resource-id", "A worker's id.").DefaultText("the host name and the process id")
	keySlots      = config.Int("taskmanager.numberOfTaskSlots", "Task slots a worker offers.").
			Default(DefaultSlots).Check(config.Between(1, math.MaxInt32))
	keyDataPort = config.Int("taskmanager.data.port", "A worker's data plane port.").
			Default(DefaultDataPort).Check(config.Between(0, 65535))
	keyHeartbeatInterval = config.Duration("heartbeat.interval", "Between heartbeats of a worker and the coordinator.").
				Default(DefaultHeartbeatInterval)
	keyHeartbeatTimeout = config.Duration("heartbeat.timeout", "A process silent this long is lost.").Default(DefaultHeartbeatTimeout)
	keySlotTimeout      = config.Duration("slot.request.timeout", "How long an attempt waits for enough slots before it fails.").
				Default(DefaultSlotTimeout)

	// Flink's security.ssl.internal.* with PEM files instead of Java key
	// stores: cert and key instead of keystore, truststore a PEM bundle.
	keyTLSEnabled = config.Bool(peerauth.KeyTLSEnabled,
		"Mutual TLS between the processes of a job, on the control and data planes: each presents "+peerauth.KeyTLSCert+
			" and verifies the other's against "+peerauth.KeyTLSTruststore+" (--tls-cert, --tls-key, --tls-ca turn it on).").Default(false)
	keyTLSCert  = config.String(peerauth.KeyTLSCert, "This process's certificate chain, a PEM file; read again when it changes.")
	keyTLSKey   = config.String(peerauth.KeyTLSKey, "The PEM private key of "+peerauth.KeyTLSCert+".")
	keyTLSTrust = config.String(peerauth.KeyTLSTruststore,
		"A PEM file of the certificates of the CA that issued every process's certificate (host names are not checked).")
	keyHandshakeTimeout = config.Duration(peerauth.KeyHandshakeTimeout, "Bounds a connection's authentication.").
				Default(peerauth.DefaultHandshakeTimeout).Check(config.Positive)
	keySecret = config.String(peerauth.KeySecret,
		"A secret shared by the processes of a job (at least 16 bytes), which each proves it holds by challenge-response: it never crosses the wire. Alone or with mutual TLS.").
		Sensitive()
	keySecretFile = config.String(peerauth.KeySecretFile, "A file holding "+peerauth.KeySecret+" (a trailing newline dropped), instead of the key.")
	keyInsecure   = config.Bool(peerauth.KeyInsecure,
		"Listen beyond the loopback interface with neither mutual TLS nor a secret: anyone who reaches the ports joins the job. Refused unless true; logged at WARN on every start.").
		Default(false)
)

// configKeys in the order they apply: the address before the port.
var configKeys = config.Fields[Config]{
	config.Field(keyRole, func(c *Config, r Role) { c.Role = r }),
	config.Field(keyRPCAddress, func(c *Config, v string) {
		_, port, _ := strings.Cut(c.Coordinator, ":")
		c.Coordinator = v
		if port != "" {
			c.Coordinator += ":" + port
		} else if !strings.Contains(v, ":") {
			c.Coordinator += ":" + strconv.Itoa(DefaultRPCPort)
		}
	}),
	config.Field(keyRPCPort, func(c *Config, p int) {
		host, _, _ := strings.Cut(c.Coordinator, ":")
		c.Coordinator = host + ":" + strconv.Itoa(p)
		c.Listen = ":" + strconv.Itoa(p)
	}),
	config.Field(keyHost, func(c *Config, v string) { c.Host = v }),
	config.Field(keyResourceID, func(c *Config, v string) { c.WorkerID = v }),
	config.Field(keySlots, func(c *Config, n int) { c.Slots = n }),
	config.Field(keyDataPort, func(c *Config, p int) { c.DataListen = ":" + strconv.Itoa(p) }),
	config.Field(keyHeartbeatInterval, func(c *Config, d time.Duration) { c.HeartbeatInterval = d }),
	config.Field(keyHeartbeatTimeout, func(c *Config, d time.Duration) { c.HeartbeatTimeout = d }),
	config.Field(keySlotTimeout, func(c *Config, d time.Duration) { c.SlotTimeout = d }),
	config.Field(ha.KeyEndpoints, func(c *Config, eps []string) { c.EtcdEndpoints = eps }),
	config.Field(ha.KeyPathRoot, func(c *Config, v string) { c.EtcdPrefix = v }),
	config.Field(ha.KeyLeaseDuration, func(c *Config, d time.Duration) { c.LeaseDuration = d }),
	config.Field(ha.KeyUsername, func(c *Config, v string) { c.EtcdUsername = v }),
	config.Field(ha.KeyPassword, func(c *Config, v string) { c.EtcdPassword = v }),
	config.Field(ha.KeyTLSCA, func(c *Config, v string) { c.EtcdTLSCA = v }),
	config.Field(ha.KeyTLSCert, func(c *Config, v string) { c.EtcdTLSCert = v }),
	config.Field(ha.KeyTLSKey, func(c *Config, v string) { c.EtcdTLSKey = v }),
	config.Field(keyTLSEnabled, func(c *Config, v bool) { c.Security.TLS = v }),
	config.Field(keyTLSCert, func(c *Config, v string) { c.Security.CertFile = v }),
	config.Field(keyTLSKey, func(c *Config, v string) { c.Security.KeyFile = v }),
	config.Field(keyTLSTrust, func(c *Config, v string) { c.Security.TrustFile = v }),
	config.Field(keyHandshakeTimeout, func(c *Config, d time.Duration) { c.Security.HandshakeTimeout = d }),
	config.Field(keySecret, func(c *Config, v string) { c.Security.Secret = []byte(v) }),
	config.Field(keySecretFile, func(c *Config, v string) { c.Security.SecretFile = v }),
	config.Field(keyInsecure, func(c *Config, v bool) { c.Security.Insecure = v }),
	config.Field(network.KeyMaxPendingRequests, func(c *Config, n int) { c.DataLimits.MaxPendingRequests = n }),
	config.Field(network.KeyMaxConnectionsPerPeer, func(c *Config, n int) { c.DataLimits.MaxConnectionsPerPeer = n }),
	config.Field(network.KeyIdleTimeout, func(c *Config, d time.Duration) { c.DataLimits.IdleTimeout = d }),
}

// Set applies a Flink-named option: cluster.role (coordinator, worker),
// jobmanager.rpc.address, jobmanager.rpc.port, taskmanager.host,
// taskmanager.resource-id, taskmanager.numberOfTaskSlots,
// taskmanager.data.port, heartbeat.interval, heartbeat.timeout,
// slot.request.timeout (durations: "10 s", "500 ms", "1 min"),
// high-availability.etcd.endpoints (a list; empty: none),
// high-availability.etcd.path.root, high-availability.etcd.lease-duration,
// etcd's user and TLS (high-availability.etcd.username, .password,
// .tls.ca, .tls.cert, .tls.key), the processes' authentication
// (security.ssl.internal.enabled, .cert, .key, .truststore,
// .handshake-timeout; security.internal.secret, .secret-file, .insecure)
// and the data plane's bounds
// (taskmanager.network.max-pending-requests-per-connection,
// .max-connections-per-peer, .connection.idle-timeout).
func (c *Config) Set(key, value string) error {
	if key == ha.KeyEndpoints.Name() {
		c.EtcdEndpoints, _ = config.ParseList(value) // empty: HA off, as --etcd ""
		return nil
	}
	if err := configKeys.Set(c, key, value); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// FromConfiguration returns the Config of conf's keys, and whether it
// sets any. Over no earlier Config they go over the SLUICE_* variables
// (FromEnv): the file's keys first, then the variables, then the
// environment's keys and -D. Over an earlier one (a program's, or its
// flags' and variables'), the file's and the environment's keys fill
// only what it leaves unset; -D overrides it. high-availability.type
// none turns HA off; etcd needs endpoints.
func FromConfiguration(conf *config.Configuration, earlier *Config) (Config, bool, error) {
	haOn, haSet, err := ha.KeyType.Get(conf)
	if err != nil {
		return Config{}, false, err
	}
	set := haSet
	for _, k := range conf.Keys() {
		set = set || configKeys.Takes(k)
	}
	if !set {
		return Config{}, false, nil
	}
	var errs []error
	apply := func(c *Config, conf *config.Configuration) {
		_, err := configKeys.Configure(c, conf)
		errs = append(errs, err)
	}
	var cc Config
	if earlier == nil {
		apply(&cc, conf.Only(config.LayerFile))
		if err := cc.FromEnv(); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", config.ErrInvalidOption, err))
		}
		apply(&cc, conf.Only(config.LayerEnv, config.LayerDynamic))
	} else {
		cc = *earlier
		var fill Config
		apply(&fill, conf.Only(config.LayerFile, config.LayerEnv))
		fillUnset(&cc, fill)
		apply(&cc, conf.Only(config.LayerDynamic))
	}
	if haSet {
		switch {
		case !haOn:
			cc.EtcdEndpoints = nil
		case len(cc.EtcdEndpoints) == 0:
			errs = append(errs, conf.KeyError(ha.KeyType.Name(), fmt.Errorf("etcd needs %s", ha.KeyEndpoints.Name())))
		}
	}
	return cc, true, errors.Join(errs...)
}

// fillUnset copies into dst the exported fields of src that dst leaves
// zero, field by field in the structs it holds (Security, DataLimits).
func fillUnset(dst *Config, src Config) {
	fillValue(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src))
}

func fillValue(d, s reflect.Value) {
	for i := range d.NumField() {
		switch {
		case !d.Type().Field(i).IsExported():
		case d.Field(i).Kind() == reflect.Struct:
			fillValue(d.Field(i), s.Field(i))
		case d.Field(i).IsZero() && !s.Field(i).IsZero():
			d.Field(i).Set(s.Field(i))
		}
	}
}
