package events

// Header is an event's message headers as the journal stores them: NATS
// headers, whose names are case-sensitive and may carry several values. It
// has the same layout as nats.Header, so either converts to the other
// without copying.
type Header map[string][]string

// Get returns the first value of key, "" if there is none.
func (h Header) Get(key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces key's values with value.
func (h Header) Set(key, value string) { h[key] = []string{value} }
