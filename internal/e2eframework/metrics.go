// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package e2eframework

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dra-failfast/dra-failfast/internal/localcluster"
)

// ErrMetricNotFound: no sample of the metric with the labels asked for. A
// counter that was never incremented has no sample yet.
var ErrMetricNotFound = errors.New("metric not found")

// KubeletMetric returns the value of the kubelet's metric name: the sum of
// all its samples whose labels include labels (nil: all samples). It reads
// /metrics of the kubelet through the API server's node proxy, which works
// with the cluster's admin credentials (the kubelet itself wants
// authenticated HTTPS). For a histogram, ask for name_count, name_sum or
// name_bucket with an "le" label.
func KubeletMetric(ctx context.Context, c *localcluster.Cluster, name string, labels map[string]string) (float64, error) {
	data, err := KubeletMetrics(ctx, c)
	if err != nil {
		return 0, err
	}
	return MetricValue(data, name, labels)
}

// KubeletMetrics returns the kubelet's /metrics, read as KubeletMetric does.
func KubeletMetrics(ctx context.Context, c *localcluster.Cluster) ([]byte, error) {
	data, err := c.Client().CoreV1().RESTClient().Get().
		AbsPath("/api/v1/nodes", c.NodeName(), "proxy", "metrics").
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the kubelet's metrics: %w", err)
	}
	return data, nil
}

// MetricShapes returns what a scrape in Prometheus text exposition format
// exposes, values aside: for each metric family whose name contains
// nameContains, the sets of label names of its samples ("le" and "quantile"
// left out), each as a sorted comma-separated list. A family with a
// # TYPE line and no sample (a vector nobody observed yet) is not exposed.
func MetricShapes(text []byte, nameContains string) (map[string][]string, error) {
	shapes := map[string][]string{}
	err := eachSampleLine(text, func(s string) error {
		sample, err := parseSample(s)
		if err != nil || !strings.Contains(sample.name, nameContains) {
			return err
		}
		family := sample.name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			family = strings.TrimSuffix(family, suffix)
		}
		var names []string
		for name := range sample.labels {
			if name != "le" && name != "quantile" {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		if shape := strings.Join(names, ","); !slices.Contains(shapes[family], shape) {
			shapes[family] = append(shapes[family], shape)
			slices.Sort(shapes[family])
		}
		return nil
	})
	return shapes, err
}

// eachSampleLine calls fn with each sample line of a scrape (comments and
// blank lines left out); an error names the line.
func eachSampleLine(text []byte, fn func(line string) error) error {
	scanner := bufio.NewScanner(bytes.NewReader(text))
	scanner.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for line := 1; scanner.Scan(); line++ {
		s := strings.TrimSpace(scanner.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if err := fn(s); err != nil {
			return fmt.Errorf("metrics line %d: %w", line, err)
		}
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("read metrics: %w", err)
	}
	return nil
}

// MetricValue finds the metric name in Prometheus text exposition format
// (version 0.0.4) and returns the sum of the samples whose labels include
// labels, or ErrMetricNotFound.
func MetricValue(text []byte, name string, labels map[string]string) (float64, error) {
	var (
		sum   float64
		found bool
	)
	err := eachSampleLine(text, func(s string) error {
		if !strings.HasPrefix(s, name) {
			return nil
		}
		sample, err := parseSample(s)
		if err != nil || sample.name != name || !includes(sample.labels, labels) {
			return err
		}
		sum += sample.value
		found = true
		return nil
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%w: %s%s", ErrMetricNotFound, name, formatLabels(labels))
	}
	return sum, nil
}

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseSample parses `name{label="value",...} value [timestamp]`.
func parseSample(s string) (sample, error) {
	end := strings.IndexAny(s, "{ \t")
	if end <= 0 {
		return sample{}, fmt.Errorf("no value in %q", s)
	}
	result := sample{name: s[:end], labels: map[string]string{}}
	rest := s[end:]
	if rest[0] == '{' {
		var err error
		if rest, err = parseLabels(rest[1:], result.labels); err != nil {
			return sample{}, fmt.Errorf("%s: %w", result.name, err)
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 || len(fields) > 2 {
		return sample{}, fmt.Errorf("%s: want a value and an optional timestamp, got %q", result.name, rest)
	}
	value, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", result.name, err)
	}
	result.value = value
	return result, nil
}

// parseLabels parses `label="value",...}` into labels and returns what
// follows the closing brace.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return "", fmt.Errorf("malformed labels at %q", s)
		}
		key := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var value strings.Builder
		closed := false
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && i+1 < len(s):
				i++
				switch s[i] {
				case 'n':
					value.WriteByte('\n')
				default:
					value.WriteByte(s[i])
				}
			case c == '"':
				s, closed = s[i+1:], true
			default:
				value.WriteByte(c)
			}
			if closed {
				break
			}
		}
		if !closed {
			return "", fmt.Errorf("unterminated value of label %s", key)
		}
		labels[key] = value.String()
		s = strings.TrimLeft(s, " \t")
		s = strings.TrimPrefix(s, ",")
	}
}

func includes(have, want map[string]string) bool {
	for key, value := range want {
		if got, ok := have[key]; !ok || got != value {
			return false
		}
	}
	return true
}

func formatLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	parts := make([]string, 0, len(labels))
	for key, value := range labels {
		parts = append(parts, key+"="+strconv.Quote(value))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}
