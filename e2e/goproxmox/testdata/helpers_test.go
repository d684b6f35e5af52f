// Copyright (c) go-proxmox authors (github.com/luthermonson/go-proxmox).
// Licensed under the Apache License, Version 2.0: see LICENSE in
// github.com/luthermonson/go-proxmox@v0.8.1 (in the Go module cache after
// `go mod download github.com/luthermonson/go-proxmox@v0.8.1`).
//
// Provenance: go-proxmox's tests/integration/proxmox_test.go at commit
// c8de04376b1bdeec9782e90ff35ec8240a5375a9, where these declarations were
// commented out; upstream deleted them in 53c0606 ("drop a long-dead
// commented-out block in the integration test"). v0.8.1's storage_test.go,
// tasks_test.go and virtual_machines_test.go (build tag "nodes") still use
// them, so without this file `go test -tags nodes ./tests/integration` does
// not compile at v0.8.1. Changes from the original: uncommented; math/rand
// with its deprecated rand.Seed replaced by crypto/rand; downloadFile
// (unused) left out.
//
// e2e/goproxmox/run.sh copies this file next to v0.8.1's integration tests.
// It sits under testdata/ so that `go build ./...` and `go vet ./...` of
// converge never compile it.

//go:build nodes

package integration

import (
	"crypto/rand"
	"fmt"
	"os"

	backendfile "github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

var (
	tinycoreURL     = "https://github.com/luthermonson/go-proxmox/releases/download/tests/tinycore.iso"
	ubuntuURL       = "https://releases.ubuntu.com/20.04.3/ubuntu-20.04.3-desktop-amd64.iso"
	alpineAppliance = "http://download.proxmox.com/images/system/alpine-3.17-default_20221129_amd64.tar.xz"
)

func nameGenerator(length int) string {
	b := make([]byte, length)
	_, _ = rand.Read(b)
	rstr := fmt.Sprintf("%x", b)[:length]
	return fmt.Sprintf("go-proxmox-%s", rstr)
}

func createTestISO(file string) error {
	//making iso
	blocksize := int64(2048)
	iso, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, os.FileMode(0700))
	if err != nil {
		return err
	}
	defer func() { _ = iso.Close() }()

	// Wrap the *os.File in a backend.Storage
	backend := backendfile.New(iso, false)
	fs, err := iso9660.Create(backend, 0, 0, blocksize, "")
	if err != nil {
		return err
	}

	err = fs.Mkdir("/")
	if err != nil {
		return err
	}

	return fs.Finalize(iso9660.FinalizeOptions{
		RockRidge:        true,
		VolumeIdentifier: "cidata",
	})
}
