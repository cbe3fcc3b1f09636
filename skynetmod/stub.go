package skynetmod

import _ "embed"

// Stub is skynet.pyi, the type stub editors use for the `skynet` module.
//
//go:embed skynet.pyi
var Stub string

// dspySource defines skynet.dspy_metric; the module runs it when imported.
//
//go:embed dspy.py
var dspySource string
