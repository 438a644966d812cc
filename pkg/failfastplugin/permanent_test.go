// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"errors"
	"fmt"
	"testing"
)

func TestPermanent(t *testing.T) {
	base := errors.New("invalid opaque config")
	cases := map[string]struct {
		err  error
		want bool
	}{
		"nil":                 {err: nil},
		"plain":               {err: base},
		"marked":              {err: Permanent(base), want: true},
		"wrapped with %w":     {err: fmt.Errorf("claim x: %w", Permanent(base)), want: true},
		"joined":              {err: errors.Join(errors.New("other"), Permanent(base)), want: true},
		"formatted with %v":   {err: fmt.Errorf("claim x: %v", Permanent(base))},
		"marked twice":        {err: Permanent(Permanent(base)), want: true},
		"wrapped then marked": {err: Permanent(fmt.Errorf("x: %w", base)), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsPermanent(tc.err); got != tc.want {
				t.Errorf("IsPermanent = %v, want %v", got, tc.want)
			}
		})
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	marked := Permanent(base)
	if marked.Error() != base.Error() || !errors.Is(marked, base) {
		t.Errorf("Permanent changed the error: %q, Is(base) = %v", marked, errors.Is(marked, base))
	}
}
