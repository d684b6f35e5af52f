package pvesim

import (
	"net/http"
	"strings"

	"github.com/converge-pve/converge/internal/pveschema"
)

// ---- API schema check -------------------------------------------------------
//
// Every request is checked against the operation's rules generated from
// Proxmox's API schema (package pveschema, pve-docs 9.1.3), as
// pve-common's PVE::JSONSchema::validate checks it in the API server before
// the handler runs: undeclared parameters (additionalProperties 0 on every
// operation), missing required ones, types, patterns, lengths, ranges,
// enumerations, named formats and property strings. All problems come in
// one 400 {"errors":{"<param>":"<message>"},"data":null}.
//
// The same 9.1.3 rules apply with Version "7", as the hand-kept list they
// replace did: the PVE 7 mode differs in its answers (memory typing,
// pools, resize), not in what it accepts; TestSchemaMatrixUndeclared runs
// in both modes.

// schemaPath is the request's path as the schema's operations are matched:
// the registered pattern with the request's path values; a {volume...}
// value's slashes (local:iso/x.iso) are escaped so it stays one segment,
// and its text is only checked as a plain string.
func schemaPath(r *http.Request, pattern string) string {
	_, path, _ := strings.Cut(pattern, " ")
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "...")
			segs[i] = strings.ReplaceAll(r.PathValue(name), "/", "%2F")
		}
	}
	return strings.Join(segs, "/")
}

// schemaCheck refuses a request its operation's schema refuses. An
// operation the schema does not have is left to its handler.
func schemaCheck(r *http.Request, pattern string, params map[string]string) error {
	path := schemaPath(r, pattern)
	if _, _, ok := pveschema.Lookup(r.Method, path); !ok {
		return nil
	}
	if errs := pveschema.Validate(r.Method, path, params); len(errs) > 0 {
		return paramErr(errs)
	}
	return nil
}

// configOps are the config updates whose parameters other than their
// options are the guest's config keys.
var configOps = map[Kind]*pveschema.Operation{}

func init() {
	for _, kind := range []Kind{QEMU, LXC} {
		op, _, _ := pveschema.Lookup(http.MethodPut, "/nodes/n/"+string(kind)+"/100/config")
		configOps[kind] = op
	}
}

// configKey reports whether key is a config key of the kind: declared by
// PUT /nodes/{node}/{qemu,lxc}/{vmid}/config (API schema) and not one of
// the update's options (configMeta). A create's or update's other declared
// parameters (bwlimit, import-working-storage, …) are accepted without
// effect.
func configKey(kind Kind, key string) bool {
	return !configMeta[key] && configOps[kind] != nil && configOps[kind].Param(key) != nil
}

// resolveCdromAlias is qemu-server's $resolve_cdrom_alias (src/PVE/API2/Qemu.pm,
// create and config update): a non-empty cdrom is ide2, with ",media=cdrom"
// unless it names a media.
func resolveCdromAlias(params map[string]string) {
	v := params["cdrom"]
	if v == "" {
		return
	}
	if !strings.Contains(v, "media=") {
		v += ",media=cdrom"
	}
	params["ide2"] = v
	delete(params, "cdrom")
}
