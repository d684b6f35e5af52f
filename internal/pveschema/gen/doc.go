// Command gen turns Proxmox's published API schema (pve-docs'
// api-viewer/apidata.js, a JavaScript file holding `const apiSchema = [...]`)
// into Go data: internal/pveschema/rules_gen.go and the rules_*_gen.go
// files it concatenates (none over 450 lines), one Operation per HTTP
// method and path template of a chosen set, with each parameter's type,
// optionality, enum, bounds, pattern, named format and property-string keys.
// Descriptions are dropped: the rules are for validating, not documenting.
//
// The apidata.js stays outside the repository; its path is an argument:
//
//	PVE_APIDATA=/path/to/apidata.js go generate ./internal/pveschema
//
// -version names the pve-docs release (the file does not carry it; a name
// like pve-docs-9.1.3-apidata.js must agree); -prefixes keeps only the
// operations under some paths (default: all).
//
// The output is deterministic (sorted operations, parameters and keys;
// identical property-string formats shared through one variable), so the
// up-to-date test can compare bytes.
package main
