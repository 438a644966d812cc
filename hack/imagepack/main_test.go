// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPack(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Binary: exe, Name: "dra-failfast.local/test:v1", Entrypoint: []string{"/x", "--mode=pause"}}
	var first, second bytes.Buffer
	if err := Pack(&first, opts); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	if err := Pack(&second, opts); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("Pack is not reproducible")
	}

	files := map[string][]byte{}
	for hdr, data := range tarEntries(t, first.Bytes()) {
		files[hdr.Name] = data
		if strings.HasPrefix(hdr.Name, "blobs/sha256/") && hdr.Typeflag == tar.TypeReg {
			if got := fmt.Sprintf("blobs/sha256/%x", sha256.Sum256(data)); got != hdr.Name {
				t.Errorf("blob %s has digest %s", hdr.Name, got)
			}
		}
	}
	var idx index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations["io.containerd.image.name"] != opts.Name {
		t.Fatalf("index.json does not name the image: %s", files["index.json"])
	}
	var man manifest
	if err := json.Unmarshal(files["blobs/"+strings.Replace(idx.Manifests[0].Digest, ":", "/", 1)], &man); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	var cfg imageConfig
	if err := json.Unmarshal(files["blobs/"+strings.Replace(man.Config.Digest, ":", "/", 1)], &cfg); err != nil {
		t.Fatalf("config: %v", err)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != "/x --mode=pause" {
		t.Errorf("entrypoint = %q", cfg.Config.Entrypoint)
	}
	if len(man.Layers) != 1 || cfg.RootFS.DiffIDs[0] != man.Layers[0].Digest {
		t.Errorf("layers %v do not match diff_ids %v", man.Layers, cfg.RootFS.DiffIDs)
	}

	if err := Pack(io.Discard, Options{Binary: exe, Name: "no-tag"}); err == nil {
		t.Error("Pack accepted an image name without tag")
	}
}

// TestPackShortName: a short name is recorded as the container runtime completes it (the
// default registry's library/ path), which a pod asking for the short name looks up.
func TestPackShortName(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Pack(&out, Options{Binary: exe, Name: "busybox:v1"}); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	var idx index
	for hdr, data := range tarEntries(t, out.Bytes()) {
		if hdr.Name == "index.json" {
			if err := json.Unmarshal(data, &idx); err != nil {
				t.Fatal(err)
			}
		}
	}
	name := idx.Manifests[0].Annotations["io.containerd.image.name"]
	if !strings.HasSuffix(name, "/library/busybox:v1") || strings.Count(name, "/") != 2 {
		t.Errorf("recorded name %q, want the full name of busybox:v1", name)
	}
	if tag := idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; tag != "v1" {
		t.Errorf("ref.name %q, want v1", tag)
	}
}

// TestPackLinks: a multi-call binary gets its links, their directories once each and before the
// links, and an Env that sets PATH replaces the default one.
func TestPackLinks(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Binary: exe, Name: "dra-failfast.local/test:v1", Links: []string{"/bin/sh", "/bin/sleep", "/usr/bin/env"},
		Env: []string{"PATH=/bin:/usr/bin"}}
	layer, err := layerTar("/"+filepath.Base(exe), nil, opts.Links)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for hdr := range tarEntries(t, layer) {
		entry := hdr.Name
		if hdr.Typeflag == tar.TypeSymlink {
			entry += " -> " + hdr.Linkname
		}
		got = append(got, entry)
	}
	base := filepath.Base(exe)
	want := []string{base, "bin/", "bin/sh -> /" + base, "bin/sleep -> /" + base, "usr/", "usr/bin/", "usr/bin/env -> /" + base}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("layer entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	var buf bytes.Buffer
	if err := Pack(&buf, opts); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"Env":["PATH=/bin:/usr/bin"]`)) {
		t.Error("the image config does not have exactly the given PATH")
	}

	for _, bad := range []string{"bin/sh", "/bin/../sh", "/" + base} {
		if _, err := layerTar("/"+base, nil, []string{bad}); err == nil {
			t.Errorf("layerTar accepted link %q", bad)
		}
	}
}

// tarEntries yields each entry of a tar archive with its content; a malformed archive fails t.
func tarEntries(t *testing.T, archive []byte) iter.Seq2[*tar.Header, []byte] {
	t.Helper()
	return func(yield func(*tar.Header, []byte) bool) {
		tr := tar.NewReader(bytes.NewReader(archive))
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if !yield(hdr, data) {
				return
			}
		}
	}
}

// TestPackBaseLayer: the base layer comes first, as is, and the binary's layer on top; a base
// that is not a tarball is refused with its name.
func TestPackBaseLayer(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var base bytes.Buffer
	tw := tar.NewWriter(&base)
	if err := writeTarFile(tw, "usr/sbin/iptables", 0o755, []byte("#!/bin/sh\n")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	basePath := filepath.Join(dir, "base.tar")
	if err := os.WriteFile(basePath, base.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opts := Options{Binary: exe, Name: "dra-failfast.local/test:v1", BaseLayer: basePath}
	if err := Pack(&out, opts); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	files := map[string][]byte{}
	for hdr, data := range tarEntries(t, out.Bytes()) {
		files[hdr.Name] = data
	}
	var idx index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	var man manifest
	if err := json.Unmarshal(files["blobs/"+strings.Replace(idx.Manifests[0].Digest, ":", "/", 1)], &man); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	wantBase := fmt.Sprintf("sha256:%x", sha256.Sum256(base.Bytes()))
	if len(man.Layers) != 2 || man.Layers[0].Digest != wantBase {
		t.Fatalf("layers = %v, want the base layer %s first and the binary's second", man.Layers, wantBase)
	}
	if !bytes.Equal(files["blobs/"+strings.Replace(wantBase, ":", "/", 1)], base.Bytes()) {
		t.Error("the base layer blob is not the base tarball as is")
	}

	notTar := filepath.Join(dir, "not.tar")
	if err := os.WriteFile(notTar, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Pack(io.Discard, Options{Binary: exe, Name: "dra-failfast.local/test:v1", BaseLayer: notTar})
	if err == nil || !strings.Contains(err.Error(), notTar) {
		t.Errorf("Pack with a base layer that is not a tarball: err = %v, want one naming %s", err, notTar)
	}
}
