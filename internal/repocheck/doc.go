// Package doccheck holds the repository-wide test that every Go package
// states its contract in a doc.go (DESIGN.md §10). It has no runtime code.
package doccheck
