package lease

import (
	"crypto/rand"
	"encoding/hex"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
)

// Assign returns each partition's preferred member: rendezvous hashing of
// (member, partition), bounded so that every member prefers
// floor(partitions/members) or one more. Every member computes the same assignment from
// the same member list; it is balanced, and a join or a leave moves few
// partitions. Empty strings when there are no members.
func Assign(partitions int, members []string) []string {
	out := make([]string, partitions)
	if len(members) == 0 {
		return out
	}
	ms := append([]string(nil), members...)
	sort.Strings(ms)
	// floor each, and rem members one more: exactly balanced.
	floor, rem := partitions/len(ms), partitions%len(ms)
	load := make(map[string]int, len(ms))
	type cand struct {
		id    string
		score uint64
	}
	cs := make([]cand, len(ms))
	for p := range partitions {
		for i, id := range ms {
			cs[i] = cand{id, score(id, p)}
		}
		sort.Slice(cs, func(a, b int) bool {
			if cs[a].score != cs[b].score {
				return cs[a].score > cs[b].score
			}
			return cs[a].id < cs[b].id
		})
		for _, c := range cs {
			l := load[c.id]
			if l < floor || (l == floor && rem > 0) {
				if l == floor {
					rem--
				}
				out[p] = c.id
				load[c.id]++
				break
			}
		}
	}
	return out
}

func score(id string, p int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(strconv.Itoa(p)))
	// A final mix: FNV's low bits alone spread short keys poorly.
	return mix(h.Sum64())
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// MemberID makes an instance id from a name (a name like
// "executor@host.example" holds characters a key token may not; they become
// '_') and a random suffix, since two processes may share a name.
func MemberID(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	clean := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '=' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, name)
	return clean + "-" + hex.EncodeToString(b[:])
}
