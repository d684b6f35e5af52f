package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"time"
)

//go:embed assets
var assets embed.FS

// CSP admits this server's own scripts, styles and connections only:
// an injected string can neither run script nor send data elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// types are the content types served, by extension; set here rather than
// read from the system's MIME tables, which differ between hosts (a
// module script served as text/plain does not run).
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".png":  "image/png",
	".svg":  "image/svg+xml",
}

type file struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves GET / (index.html) and GET /assets/NAME; anything else
// under /assets/ is 404. Mount it on "GET /{$}" and "GET /assets/".
func Handler() http.Handler {
	files := map[string]file{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := types[path.Ext(p)]
		if !ok {
			return nil // not served: an unknown type could be sniffed
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files["/"+p] = file{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("console: embedded assets unreadable: " + err.Error()) // a build defect, not a runtime condition
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		name := r.URL.Path
		if name == "/" {
			name = "/assets/index.html"
		}
		f, ok := files[name]
		if !ok { // only the embedded files: no path is resolved on disk
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		h.Set("Content-Type", f.ctype)
		// Revalidated on every load (an upgraded server serves new
		// assets at once), answered 304 while unchanged.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}
