package skynetmod

import _ "embed"

// Stub is skynet.pyi, the type stub editors use for the `skynet` module.
//
//go:embed skynet.pyi
var Stub string
