package network

import "github.com/sluicehq/sluice/config"

// The keys of TransportLimits, the bounds of what a data connection's
// peer can make a Transport hold. Package cluster reads them into its
// workers' configuration (cluster.Config.DataLimits).
var (
	// KeyMaxPendingRequests bounds the partition requests of one
	// connection that wait for their partition to be published.
	KeyMaxPendingRequests = config.Int("taskmanager.network.max-pending-requests-per-connection",
		"Partition requests of one data connection that may wait for their partition at once; one past it is refused, its channel fails naming this key.").
		Default(DefaultMaxPendingRequests).Check(config.AtLeast(1))
	// KeyMaxConnectionsPerPeer bounds the connections accepted at once
	// from one IP address.
	KeyMaxConnectionsPerPeer = config.Int("taskmanager.network.max-connections-per-peer",
		"Data connections accepted at once from one IP address; one past it is closed as soon as it is accepted.").
		Default(DefaultMaxConnectionsPerPeer).Check(config.AtLeast(1))
	// KeyIdleTimeout closes a connection that carried no channel and no
	// request for that long.
	KeyIdleTimeout = config.Duration("taskmanager.network.connection.idle-timeout",
		"A data connection that carries no channel and no request for this long is closed.").
		Default(DefaultIdleTimeout).Check(config.Positive)
)
