package pvesim

import (
	"fmt"
	"regexp"
	"strings"
)

// Files fetched into a storage: pve-storage's download-url (volumes.go
// registers the route; the appliance download is in compat_storage.go).

var (
	isoExtRe    = regexp.MustCompile(`(?i)[^/]+\.(?:iso|img)$`)                    // $ISO_EXT_RE_0
	vztmplExtRe = regexp.MustCompile(`(?i)[^/]+\.(?:tar|tar\.(?:gz|xz|zst|bz2))$`) // $VZTMPL_EXT_RE_1
	unsafeRe    = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)                            // normalize_content_filename
)

// downloadURL is pve-storage's API2/Storage/Status.pm download_url: the
// storage must be file based and hold the content type, the filename
// (normalised: directories dropped, unsafe characters replaced by '_') must
// carry the type's extension, then a "download" task (id the filename)
// whose end puts the file into the storage's content. "import" content is
// refused by the simulated "local", which does not hold it.
func (s *Sim) downloadURL(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.needNode(q)
	if err != nil {
		return nil, err
	}
	// The schema check in serve has refused a missing url, content or
	// filename, a url that is not http(s) and an unknown content type.
	content := q.str("content")
	storeid := q.path("storage")
	st := storageByName(storeid)
	if st == nil {
		return nil, fail500("storage '%s' does not exist", storeid)
	}
	if st.typ != "dir" {
		return nil, fail500("can't upload to storage type '%s', not a file based storage!", st.typ)
	}
	if !st.hasContent(content) {
		return nil, fail500("storage '%s' is not configured for content-type '%s'", storeid, content)
	}
	filename := strings.TrimRight(q.str("filename"), "\n")
	if i := strings.LastIndexAny(filename, `/\`); i >= 0 {
		filename = filename[i+1:]
	}
	filename = unsafeRe.ReplaceAllString(filename, "_")
	re := isoExtRe
	if content == "vztmpl" {
		re = vztmplExtRe
	}
	if !re.MatchString(filename) {
		return nil, paramErr1("filename", "wrong file extension")
	}
	url := q.str("url")
	volid := storeid + ":" + content + "/" + filename
	dest := dirPath(content + "/" + filename)
	checksum := q.has("checksum")
	t := s.startLoggedTask(n.name, "download", "", 0, q.user, []string{fmt.Sprintf("downloading %s to %s", url, dest)},
		func(print func(string)) ([]string, error) {
			if checksum {
				print("calculating checksum...OK, checksum verified")
			}
			print(fmt.Sprintf("download of '%s' to '%s' finished", url, dest))
			s.downloaded(volid, content)
			return nil, nil
		}, nil)
	s.renameTask(t, filename)
	return t.upid, nil
}

// downloaded puts a fetched file into its storage's content: a template
// (content vztmpl) or an ISO image. Caller holds s.mu.
func (s *Sim) downloaded(volid, content string) {
	files := &s.isos
	if content == "vztmpl" {
		files = &s.templates
	}
	if *files == nil {
		*files = map[string]bool{}
	}
	(*files)[volid] = true
}
