// Package operators owns the built-in operators that run inside a Task's
// operator chain (map, flat map, filter, keyed and two-input process
// functions, reduce, windows, sinks), the typed Input and Output interfaces
// that chain them without copying, side outputs, and the timer service of
// keyed operators, whose timers live in keyed state so they survive a
// restore.
//
// Every method of an operator runs on its Task's goroutine, so operators and
// the user functions they call need no locks.
package operators
