// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidatePolicy: -validate-policy accepts what the kubelet accepts and
// names the entry at fault in what it refuses.
func TestValidatePolicy(t *testing.T) {
	const header = "apiVersion: dra-failfast.io/v1alpha1\nkind: DriverFailurePolicy\n"
	for name, tc := range map[string]struct {
		file, want, wantErr string
	}{
		"valid":       {file: header + "drivers:\n- driver: gpu.example.com\n  permanent: Ignore\n", want: "gpu.example.com: Ignore"},
		"typo":        {file: header + "drivers:\n- driver: gpu.example.com\n  permanent: Honour\n", wantErr: `drivers[0].permanent: Unsupported value: "Honour"`},
		"unknown key": {file: header + "drivers:\n- driver: gpu.example.com\n  retries: 3\n", wantErr: "retries"},
		"missing":     {wantErr: "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "driver-policy.yaml")
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out strings.Builder
			err := validatePolicy(&out, path)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path)):
				t.Errorf("validatePolicy = %v, want an error naming %s and containing %q", err, path, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("validatePolicy: %v", err)
			case tc.wantErr == "" && !strings.Contains(out.String(), tc.want):
				t.Errorf("validatePolicy printed %q, want %q", out.String(), tc.want)
			}
		})
	}
}
