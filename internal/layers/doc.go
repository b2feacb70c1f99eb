// Package layers owns the module's import rules: which package may import
// which (the package table of docs/DESIGN.md). Its test reads `go list`
// and fails on an import that points up the table. It has no code.
package layers
