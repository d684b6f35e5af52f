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
	if s.version.release >= "9" {
		s.handle(mux, "GET /nodes/{node}/lxc/{vmid}/migrate", s.guestHandler(LXC, s.ctMigratePrecondition))
	}
	for _, kind := range []Kind{QEMU, LXC} {
		base := "/nodes/{node}/" + string(kind) + "/{vmid}/snapshot"
		s.handle(mux, "GET "+base, s.guestHandler(kind, s.listSnapshots))
		s.handle(mux, "POST "+base, s.guestHandler(kind, s.createSnapshot))
		s.handle(mux, "GET "+base+"/{snapname}", s.guestHandler(kind, s.snapshotCmdIndex))
		s.handle(mux, "DELETE "+base+"/{snapname}", s.guestHandler(kind, s.deleteSnapshot))
		s.handle(mux, "POST "+base+"/{snapname}/rollback", s.guestHandler(kind, s.rollbackSnapshot))
		s.handle(mux, "GET "+base+"/{snapname}/config", s.guestHandler(kind, s.snapshotConfig))
		s.handle(mux, "PUT "+base+"/{snapname}/config", s.guestHandler(kind, s.updateSnapshotConfig))
	}
	ci := "/nodes/{node}/qemu/{vmid}/cloudinit"
	s.handle(mux, "GET "+ci, s.guestHandler(QEMU, s.getCloudInit))
	s.handle(mux, "PUT "+ci, s.guestHandler(QEMU, s.putCloudInit))
	s.handle(mux, "GET "+ci+"/dump", s.guestHandler(QEMU, s.dumpCloudInit))
	s.poolRoutes(mux)
}
