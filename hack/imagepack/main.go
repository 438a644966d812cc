// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command imagepack packs one static binary as a single-layer container image and writes it as
// an OCI image-layout tarball that `ctr images import` understands, named by the
// io.containerd.image.name annotation. The output is reproducible: same binary, same digests.
//
//	imagepack --binary _output/bin/test-workload --name dra-failfast.local/workload:v1 \
//	  --entrypoint /test-workload --output _output/images/workload.tar
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
)

const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// Options describes the image to pack.
type Options struct {
	// Binary is the file to put into the image, as /<base name of Binary>, mode 0755.
	Binary string
	// Name is the full image reference, e.g. dra-failfast.local/workload:v1.
	Name string
	// Entrypoint is the image's entrypoint; default: the binary.
	Entrypoint []string
	// Env is the image's environment, NAME=VALUE. Default PATH=/ unless Env sets PATH.
	Env []string
	// Links are absolute paths in the image made symbolic links to the binary, for a
	// multi-call binary such as busybox (/bin/sh, /bin/sleep, ...), or for a binary that
	// must be found at a fixed path (/usr/local/bin/kube-proxy).
	Links []string
	// BaseLayer is an optional uncompressed layer tarball (a root file system) put under the
	// binary's layer, for binaries that run other programs (kube-proxy runs iptables).
	BaseLayer string
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Entrypoint []string `json:"Entrypoint,omitempty"`
		Env        []string `json:"Env,omitempty"`
		WorkingDir string   `json:"WorkingDir,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

func main() {
	var opts Options
	var entrypoint, env, links, output string
	flag.StringVar(&opts.Binary, "binary", "", "static binary to pack (required)")
	flag.StringVar(&opts.Name, "name", "", "image reference, e.g. dra-failfast.local/workload:v1 (required)")
	flag.StringVar(&entrypoint, "entrypoint", "", "comma-separated entrypoint (default: /<binary name>)")
	flag.StringVar(&env, "env", "", "comma-separated NAME=VALUE environment of the image")
	flag.StringVar(&links, "links", "", "comma-separated absolute paths in the image to make symbolic links to the binary")
	flag.StringVar(&opts.BaseLayer, "base-layer", "", "uncompressed layer tarball to put under the binary's layer (optional)")
	flag.StringVar(&output, "output", "", "tarball to write (required)")
	flag.Parse()
	if opts.Binary == "" || opts.Name == "" || output == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if entrypoint != "" {
		opts.Entrypoint = strings.Split(entrypoint, ",")
	}
	if env != "" {
		opts.Env = strings.Split(env, ",")
	}
	if links != "" {
		opts.Links = strings.Split(links, ",")
	}
	if err := writeFile(output, opts); err != nil {
		fmt.Fprintf(os.Stderr, "imagepack: %v\n", err)
		os.Exit(1)
	}
}

// writeFile packs the image into output atomically, leaving an existing identical file untouched.
func writeFile(output string, opts Options) error {
	var buf bytes.Buffer
	if err := Pack(&buf, opts); err != nil {
		return err
	}
	if old, err := os.ReadFile(output); err == nil && bytes.Equal(old, buf.Bytes()) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(output), 0o755); err != nil {
		return err
	}
	tmp := output + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, output)
}

// Pack writes the OCI image-layout tarball of the image described by opts to w.
func Pack(w io.Writer, opts Options) error {
	// The CRI looks images up by their full name: a short name (busybox:v1) is recorded as
	// the container runtime completes it, so that a pod asking for the short name finds it.
	named, err := reference.ParseNormalizedNamed(opts.Name)
	if err != nil {
		return fmt.Errorf("image name %q: %w", opts.Name, err)
	}
	tagged, ok := named.(reference.Tagged)
	if !ok {
		return fmt.Errorf("image name %q has no tag", opts.Name)
	}
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return fmt.Errorf("reading binary: %w", err)
	}
	if len(bin) < 4 || string(bin[1:4]) != "ELF" {
		return fmt.Errorf("%s is not an ELF binary", opts.Binary)
	}
	name := "/" + filepath.Base(opts.Binary)
	layer, err := layerTar(name, bin, opts.Links)
	if err != nil {
		return err
	}
	layers := [][]byte{layer}
	if opts.BaseLayer != "" {
		base, err := os.ReadFile(opts.BaseLayer)
		if err != nil {
			return fmt.Errorf("reading base layer: %w", err)
		}
		if _, err := tar.NewReader(bytes.NewReader(base)).Next(); err != nil {
			return fmt.Errorf("base layer %s is not an uncompressed tarball: %w", opts.BaseLayer, err)
		}
		layers = [][]byte{base, layer}
	}

	var cfg imageConfig
	cfg.Architecture = runtime.GOARCH
	cfg.OS = "linux"
	cfg.Config.Entrypoint = opts.Entrypoint
	if len(cfg.Config.Entrypoint) == 0 {
		cfg.Config.Entrypoint = []string{name}
	}
	cfg.Config.Env = opts.Env
	if !slices.ContainsFunc(opts.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		cfg.Config.Env = append([]string{"PATH=/"}, opts.Env...)
	}
	cfg.Config.WorkingDir = "/"
	cfg.RootFS.Type = "layers"
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, digest(l))
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}

	man := manifest{
		SchemaVersion: 2,
		MediaType:     mediaTypeManifest,
		Config:        descriptor{MediaType: mediaTypeConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))},
	}
	for _, l := range layers {
		man.Layers = append(man.Layers, descriptor{MediaType: mediaTypeLayer, Digest: digest(l), Size: int64(len(l))})
	}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return err
	}
	tag := tagged.Tag()
	idx := index{
		SchemaVersion: 2,
		MediaType:     mediaTypeIndex,
		Manifests: []descriptor{{
			MediaType: mediaTypeManifest,
			Digest:    digest(manJSON),
			Size:      int64(len(manJSON)),
			Platform:  &platform{Architecture: cfg.Architecture, OS: cfg.OS},
			Annotations: map[string]string{
				"io.containerd.image.name":          named.String(),
				"org.opencontainers.image.ref.name": tag,
			},
		}},
	}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idxJSON},
		{blobPath(cfgJSON), cfgJSON},
		{blobPath(manJSON), manJSON},
	}
	dirs := []string{"blobs/", "blobs/sha256/"}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	for _, l := range layers {
		files = append(files, struct {
			name string
			data []byte
		}{blobPath(l), l})
	}
	for _, f := range files {
		if err := writeTarFile(tw, f.name, 0o644, f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// layerTar returns an uncompressed layer holding the binary at name and the symbolic links to
// it, with their directories.
func layerTar(name string, bin []byte, links []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if dir := path.Dir(name); dir != "/" {
		return nil, errors.New("binary must be at the root of the image")
	}
	if err := writeTarFile(tw, strings.TrimPrefix(name, "/"), 0o755, bin); err != nil {
		return nil, err
	}
	dirs := map[string]bool{"/": true}
	for _, link := range links {
		if !path.IsAbs(link) || path.Clean(link) != link || link == name {
			return nil, fmt.Errorf("link %q: want a clean absolute path other than the binary's", link)
		}
		// Parent directories first, each once.
		var missing []string
		for dir := path.Dir(link); !dirs[dir]; dir = path.Dir(dir) {
			missing = append(missing, dir)
			dirs[dir] = true
		}
		for i := len(missing) - 1; i >= 0; i-- {
			hdr := &tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(missing[i], "/") + "/", Mode: 0o755,
				ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, fmt.Errorf("writing %s: %w", missing[i], err)
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(link, "/"), Linkname: name, Mode: 0o777,
			ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing %s: %w", link, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeTarFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     mode,
		Size:     int64(len(data)),
		ModTime:  time.Unix(0, 0),
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

func digest(data []byte) string {
	return fmt.Sprintf("sha256:%x", sha256.Sum256(data))
}

func blobPath(data []byte) string {
	return fmt.Sprintf("blobs/sha256/%x", sha256.Sum256(data))
}
