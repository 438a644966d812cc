// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/dra-failfast/dra-failfast/internal/testdriver"
)

func TestParseFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		check   func(config) bool
		wantErr string
	}{
		"defaults": {
			check: func(cfg config) bool {
				return cfg.grpcAPI == testdriver.GRPCAPIBoth && cfg.devices == testdriver.DefaultNumDevices && cfg.driverName == testdriver.DefaultDriverName
			},
		},
		"v1 only":      {args: []string{"--grpc-api=v1"}, check: func(cfg config) bool { return cfg.grpcAPI == testdriver.GRPCAPIV1 }},
		"v1beta1 only": {args: []string{"--grpc-api=v1beta1"}, check: func(cfg config) bool { return cfg.grpcAPI == testdriver.GRPCAPIV1beta1 }},
		"both":         {args: []string{"--grpc-api=both"}, check: func(cfg config) bool { return cfg.grpcAPI == testdriver.GRPCAPIBoth }},
		"256 devices, broken ones": {
			args: []string{"--devices=256", "--broken-devices= dev-1,,dev-255 "},
			check: func(cfg config) bool {
				return cfg.devices == 256 && reflect.DeepEqual(cfg.brokenDevices, []string{"dev-1", "dev-255"})
			},
		},
		"webhook": {
			args: []string{"--webhook-address=127.0.0.1:8443", "--webhook-cert-file=tls.crt", "--webhook-key-file=tls.key"},
			check: func(cfg config) bool {
				return cfg.webhook == testdriver.WebhookOptions{Address: "127.0.0.1:8443", CertFile: "tls.crt", KeyFile: "tls.key", Path: "/validate"} && !cfg.webhookOnly
			},
		},
		"webhook only, own path": {
			args: []string{"--webhook-only", "--webhook-address=:9443", "--webhook-cert-file=c", "--webhook-key-file=k", "--webhook-path=/dra"},
			check: func(cfg config) bool {
				return cfg.webhookOnly && cfg.webhook.Address == ":9443" && cfg.webhook.Path == "/dra"
			},
		},
		"API client rate": {
			args:  []string{"--kube-api-qps=200", "--kube-api-burst=400"},
			check: func(cfg config) bool { return cfg.apiQPS == 200 && cfg.apiBurst == 400 },
		},
		"API client rate default":  {check: func(cfg config) bool { return cfg.apiQPS == 50 && cfg.apiBurst == 100 }},
		"zero QPS":                 {args: []string{"--kube-api-qps=0"}, wantErr: "--kube-api-qps must be above 0 and --kube-api-burst at least 1, got 0 and 100"},
		"no webhook by default":    {check: func(cfg config) bool { return cfg.webhook.Address == "" && !cfg.webhookOnly }},
		"webhook without key":      {args: []string{"--webhook-address=:8443", "--webhook-cert-file=c"}, wantErr: "--webhook-address needs --webhook-cert-file and --webhook-key-file"},
		"cert without webhook":     {args: []string{"--webhook-cert-file=c", "--webhook-key-file=k"}, wantErr: "--webhook-cert-file and --webhook-key-file need --webhook-address"},
		"webhook only, no address": {args: []string{"--webhook-only"}, wantErr: "--webhook-only needs --webhook-address"},
		"relative webhook path": {
			args:    []string{"--webhook-address=:8443", "--webhook-cert-file=c", "--webhook-key-file=k", "--webhook-path=validate"},
			wantErr: `--webhook-path "validate" does not start with /`,
		},
		"unknown gRPC API": {args: []string{"--grpc-api=v2"}, wantErr: `--grpc-api: gRPC API "v2" is not one of "v1", "v1beta1", "both"`},
		"too many devices": {args: []string{"--devices=257"}, wantErr: "--devices must be between 1 and 256, got 257"},
		"no devices":       {args: []string{"--devices=0"}, wantErr: "--devices must be between 1 and 256, got 0"},
		"arguments":        {args: []string{"extra"}, wantErr: `unexpected arguments ["extra"]`},
		"unknown flag":     {args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
	} {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("dra-test-driver", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg, err := parseFlags(fs, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg) {
				t.Errorf("config = %+v", cfg)
			}
		})
	}
}
