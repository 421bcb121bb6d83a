// Package notmain is a directory cellrun must refuse to run: it holds no
// main package.
package notmain

// Answer exists so that the package is not empty.
func Answer() int { return 42 }
