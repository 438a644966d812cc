// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// series is one line of a chart.
type series struct {
	name  string
	color string
	// points are (x, y); step draws a staircase (a count over time).
	points [][2]float64
	step   bool
}

// chart is a line chart rendered as a standalone SVG.
type chart struct {
	title, xLabel, yLabel string
	series                []series
	// note is printed under the title (what a missing line means).
	note string
	// xMax and yMax, when set, fix the axes' ends.
	xMax, yMax float64
}

const (
	plotWidth, plotHeight              = 720, 450
	marginLeft, marginRight            = 70, 20
	marginTop, marginBottom            = 90, 60
	innerWidth, innerHeight            = plotWidth - marginLeft - marginRight, plotHeight - marginTop - marginBottom
	forkColor, stockColor, otherColor  = "#1f77b4", "#d62728", "#2ca02c"
	axisColor, gridColor, legendOffset = "#333", "#ddd", 16
)

// niceStep returns a round tick step for a range of span with about n ticks.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// svg renders the chart.
func (c chart) svg() string {
	xMax, yMax := c.xMax, c.yMax
	for _, s := range c.series {
		for _, p := range s.points {
			if c.xMax == 0 {
				xMax = max(xMax, p[0])
			}
			if c.yMax == 0 {
				yMax = max(yMax, p[1])
			}
		}
	}
	xStep, yStep := niceStep(xMax, 8), niceStep(yMax, 6)
	xMax, yMax = math.Ceil(xMax/xStep)*xStep, math.Ceil(yMax/yStep)*yStep
	if xMax == 0 {
		xMax = xStep
	}
	if yMax == 0 {
		yMax = yStep
	}
	x := func(v float64) float64 { return marginLeft + v/xMax*innerWidth }
	y := func(v float64) float64 { return marginTop + innerHeight - v/yMax*innerHeight }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotWidth, plotHeight, plotWidth, plotHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, html.EscapeString(c.title))
	if c.note != "" {
		fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s</text>`+"\n", marginLeft, html.EscapeString(c.note))
	}
	for v := 0.0; v <= xMax+xStep/2; v += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`, x(v), marginTop, x(v), marginTop+innerHeight, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(v), marginTop+innerHeight+18, tick(v))
	}
	for v := 0.0; v <= yMax+yStep/2; v += yStep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`, marginLeft, y(v), marginLeft+innerWidth, y(v), gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginLeft-6, y(v)+4, tick(v))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", marginLeft, marginTop, innerWidth, innerHeight, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", marginLeft+innerWidth/2, plotHeight-16, html.EscapeString(c.xLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginTop+innerHeight/2, html.EscapeString(c.yLabel))
	for i, s := range c.series {
		var path []string
		for j, p := range s.points {
			if s.step && j > 0 {
				path = append(path, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(s.points[j-1][1])))
			}
			path = append(path, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
		}
		if len(path) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(path, " "))
		}
		// The legend goes above the plot, under the title: it never hides a line.
		ly := 58 + i*legendOffset
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`, marginLeft, ly-4, marginLeft+20, ly-4, s.color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", marginLeft+26, ly, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func tick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", math.Round(v*1000)/1000)
}

// cdf returns the points of the empirical CDF of xs (in percent).
func cdf(xs []float64) [][2]float64 {
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	points := make([][2]float64, 0, len(sorted)+1)
	if len(sorted) > 0 {
		points = append(points, [2]float64{sorted[0], 0})
	}
	for i, v := range sorted {
		points = append(points, [2]float64{v, 100 * float64(i+1) / float64(len(sorted))})
	}
	return points
}

// timeToFailedPlot is the CDF of the fork's time to Failed (all runs).
func (r *Results) timeToFailedPlot() string {
	var driver, apply []float64
	for _, run := range r.TimeToFailed.Runs {
		driver, apply = append(driver, run.DriverToFailedMs...), append(apply, run.ApplyToFailedMs...)
	}
	return chart{
		title:  "Time to Failed, permanently failing pods (fork)",
		note:   fmt.Sprintf("stock kubelet: %d of %d pods Failed within %.0f s (no line)", r.TimeToFailed.StockFailed, r.TimeToFailed.StockPods, r.TimeToFailed.StockWindowSeconds),
		xLabel: "milliseconds",
		yLabel: "% of pods",
		yMax:   100,
		series: []series{
			{name: "driver answer -> API Failed", color: forkColor, points: cdf(driver), step: true},
			{name: "create -> API Failed", color: otherColor, points: cdf(apply), step: true},
		},
	}.svg()
}

// driverCallsPlot is the cumulative driver calls over the calls window for
// the first failing pod of scenario 2, stock and fork.
func (r *Results) driverCallsPlot() string {
	line := func(run CallsRun, name, color string) series {
		s := series{name: name, color: color, step: true, points: [][2]float64{{0, 0}}}
		if len(run.Pods) == 0 {
			return s
		}
		times := slices.Concat(run.Pods[0].PrepareAt, run.Pods[0].UnprepareAt)
		slices.Sort(times)
		for i, t := range times {
			s.points = append(s.points, [2]float64{t, float64(i + 1)})
		}
		s.points = append(s.points, [2]float64{run.WindowSeconds, s.points[len(s.points)-1][1]})
		return s
	}
	return chart{
		title:  "Driver calls (prepare + unprepare) for one permanently failing pod",
		xLabel: "seconds since the pod was created",
		yLabel: "cumulative calls",
		xMax:   r.DriverCalls.Fork.WindowSeconds,
		series: []series{
			line(r.DriverCalls.Stock, "stock kubelet", stockColor),
			line(r.DriverCalls.Fork, "fork ("+gateName+")", forkColor),
		},
	}.svg()
}

// stormCPUPlot is the kubelet's cumulative CPU time over the storm window,
// stock and fork.
func (r *Results) stormCPUPlot() string {
	line := func(run StormRun, name, color string) series {
		s := series{name: name, color: color, points: [][2]float64{{0, 0}}}
		for _, sample := range run.Timeline {
			s.points = append(s.points, [2]float64{sample.Seconds, sample.KubeletCPUSeconds})
		}
		return s
	}
	return chart{
		title:  fmt.Sprintf("Kubelet CPU time, %d permanently failing pods created at once", r.Storm.Fork.Pods),
		xLabel: "seconds since the first pod was created",
		yLabel: "kubelet CPU seconds (user + system)",
		xMax:   r.Storm.Fork.WindowSeconds,
		series: []series{
			line(r.Storm.Stock, "stock kubelet", stockColor),
			line(r.Storm.Fork, "fork ("+gateName+")", forkColor),
		},
	}.svg()
}

// svgLines parses data as XML and returns how many lines (polylines) an
// <svg> document holds.
func svgLines(data []byte) (int, error) {
	decoder := xml.NewDecoder(bytes.NewReader(data))
	root, lines := "", 0
	for {
		tok, err := decoder.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("not XML: %w", err)
		}
		if start, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = start.Name.Local
			}
			if start.Name.Local == "polyline" {
				lines++
			}
		}
	}
	if root != "svg" {
		return 0, fmt.Errorf("root element <%s>, want <svg>", root)
	}
	return lines, nil
}
