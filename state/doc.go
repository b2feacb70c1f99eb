// Package state owns keyed and operator state: the state API that user
// functions use, key groups (how keys map to subtasks, so state can be
// rescaled), and the pure-Go heap backend.
package state
