package main

// The connectors whose checkpointed state `sluice inspect` decodes: each
// registers its decoders with package inspect/decode when imported.
import (
	_ "github.com/sluicehq/sluice/sink/filesink"
	_ "github.com/sluicehq/sluice/sink/kafka"
	_ "github.com/sluicehq/sluice/source/kafka"
)
