package pvesim

import "net/http"

// opsRoutes registers the guest operations beyond create/config/power/
// clone/delete: resize, migration, snapshots, cloud-init, pools.
func (s *Sim) opsRoutes(mux *http.ServeMux) {
	for _, kind := range []Kind{QEMU, LXC} {
		base := "/nodes/{node}/" + string(kind)
		s.handle(mux, "PUT "+base+"/{vmid}/resize", s.guestHandler(kind, s.resize))
		s.handle(mux, "POST "+base+"/{vmid}/migrate", s.guestHandler(kind, s.migrate))
	}
	s.handle(mux, "GET /nodes/{node}/qemu/{vmid}/migrate", s.guestHandler(QEMU, s.migratePrecondition))
}
