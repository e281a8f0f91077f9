package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Chart geometry, in SVG user units (pixels at 100 % zoom).
const (
	chartWidth   = 960
	panelHeight  = 400
	marginLeft   = 78
	marginRight  = 210 // room for the legend
	marginTop    = 44
	marginBottom = 52
)

// seriesColors is the Okabe-Ito palette: distinct for colour-blind readers.
var seriesColors = [...]string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

// percentileX maps a percentile to the x axis of an HdrHistogram plot:
// the number of nines, -log10(1 - p/100).
func percentileX(p float64) float64 {
	return -math.Log10(1 - p/100)
}

// ChartSVG draws the latency-by-percentile curves of runs as an SVG image:
// one panel for publish latency and, if any run has them, one for end-to-end
// latency and one for the commit latency of transactions. The x axis is the percentile on an HdrHistogram scale (each
// "nine" the same width); the y axis is latency on a log scale. A run's max
// is a dot at the right edge joined by a dashed line.
func ChartSVG(runs []*Result) string {
	names := runNames(runs)
	type panel struct {
		title  string
		curves [][]Point
	}
	pub := panel{title: "Publish latency (intended send → ack)" + workloadSuffix(runs)}
	e2e := panel{title: "End-to-end latency (intended send → consume)" + workloadSuffix(runs)}
	commit := panel{title: "Commit latency (EndTransaction round trip)" + workloadSuffix(runs)}
	hasE2E, hasTxn := false, false
	for _, r := range runs {
		pub.curves = append(pub.curves, r.Publish.Latency.Curve)
		if r.E2E != nil {
			hasE2E = true
			e2e.curves = append(e2e.curves, r.E2E.Latency.Curve)
		} else {
			e2e.curves = append(e2e.curves, nil)
		}
		if r.Transactions != nil {
			hasTxn = true
			commit.curves = append(commit.curves, r.Transactions.Commit.Curve)
		} else {
			commit.curves = append(commit.curves, nil)
		}
	}
	panels := []panel{pub}
	if hasE2E {
		panels = append(panels, e2e)
	}
	if hasTxn {
		panels = append(panels, commit)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="12">`,
		chartWidth, panelHeight*len(panels), chartWidth, panelHeight*len(panels))
	b.WriteString("\n" + `<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	for i, p := range panels {
		drawPanel(&b, float64(i*panelHeight), p.title, names, p.curves)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// drawPanel draws one chart at vertical offset top.
func drawPanel(b *strings.Builder, top float64, title string, names []string, curves [][]Point) {
	x0, x1 := float64(marginLeft), float64(chartWidth-marginRight)
	y0, y1 := top+marginTop, top+panelHeight-marginBottom // y0 is the top of the plot area

	// Axis ranges: x up to the deepest finite percentile (at least 99 %), y
	// over whole decades around every value.
	maxX := 2.0
	loMs, hiMs := math.Inf(1), math.Inf(-1)
	for _, c := range curves {
		for _, pt := range c {
			if pt.Percentile < 100 {
				maxX = max(maxX, math.Ceil(percentileX(pt.Percentile)-1e-9))
			}
			v := max(pt.Ms, 0.001)
			loMs, hiMs = min(loMs, v), max(hiMs, v)
		}
	}
	maxX = min(maxX, curveDecades)
	if math.IsInf(loMs, 0) {
		loMs, hiMs = 0.1, 10
	}
	loMs, hiMs = niceFloor(loMs), niceCeil(hiMs)
	if hiMs <= loMs {
		hiMs = niceCeil(loMs * 1.01)
	}
	lo, hi := math.Log10(loMs), math.Log10(hiMs)
	sx := func(x float64) float64 { return x0 + (x1-x0)*x/maxX }
	sy := func(ms float64) float64 {
		return y1 - (y1-y0)*(math.Log10(max(ms, 0.001))-lo)/(hi-lo)
	}

	fmt.Fprintf(b, `<text x="%s" y="%s" font-size="15" font-weight="600">%s</text>`+"\n", f1(x0), f1(top+26), html.EscapeString(title))

	// Grid and y labels at 1, 2, 5 of each decade.
	b.WriteString(`<g stroke="#e3e3e3" stroke-width="1">` + "\n")
	var ylabels strings.Builder
	for d := math.Floor(lo); d <= math.Ceil(hi); d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if l := math.Log10(v); l < lo-1e-9 || l > hi+1e-9 {
				continue
			}
			y := sy(v)
			stroke := ""
			if m == 1 {
				stroke = ` stroke="#c8c8c8"`
			}
			fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s"%s/>`+"\n", f1(x0), f1(y), f1(x1), f1(y), stroke)
			fmt.Fprintf(&ylabels, `<text x="%s" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", f1(x0-6), f1(y), axisMs(v))
		}
	}
	// x grid at each nine, plus 50 %.
	xticks := []float64{0, percentileX(50)}
	for k := 1.0; k <= maxX; k++ {
		xticks = append(xticks, k)
	}
	var xlabels strings.Builder
	for _, x := range xticks {
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", f1(sx(x)), f1(y0), f1(sx(x)), f1(y1))
		fmt.Fprintf(&xlabels, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", f1(sx(x)), f1(y1+18), nines(x))
	}
	b.WriteString("</g>\n<g fill=\"#444\">\n")
	b.WriteString(ylabels.String())
	b.WriteString(xlabels.String())
	b.WriteString("</g>\n")
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#888"/>`+"\n", f1(x0), f1(y0), f1(x1-x0), f1(y1-y0))
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="#444">percentile</text>`+"\n", f1((x0+x1)/2), f1(y1+40))
	fmt.Fprintf(b, `<text transform="translate(%s %s) rotate(-90)" text-anchor="middle" fill="#444">latency, ms (log scale)</text>`+"\n", f1(x0-58), f1((y0+y1)/2))

	// Curves.
	for i, c := range curves {
		if len(c) == 0 {
			continue
		}
		color := seriesColors[i%len(seriesColors)]
		var pts []string
		var last Point
		var maxPt *Point
		for _, pt := range c {
			if pt.Percentile >= 100 {
				maxPt = &pt
				continue
			}
			pts = append(pts, f1(sx(min(percentileX(pt.Percentile), maxX)))+","+f1(sy(pt.Ms)))
			last = pt
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2.2" stroke-linejoin="round" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		if maxPt != nil && len(pts) > 0 {
			lx, ly := sx(min(percentileX(last.Percentile), maxX)), sy(last.Ms)
			mx, my := sx(maxX), sy(maxPt.Ms)
			fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="4 3"/>`+"\n", f1(lx), f1(ly), f1(mx), f1(my), color)
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3.5" fill="%s"><title>%s max %s ms</title></circle>`+"\n", f1(mx), f1(my), color, html.EscapeString(names[i]), FormatMs(maxPt.Ms))
		}
	}

	// Legend to the right of the plot.
	lx := x1 + 16
	for i, name := range names {
		ly := y0 + 10 + float64(i)*22
		color := seriesColors[i%len(seriesColors)]
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"/>`+"\n", f1(lx), f1(ly), f1(lx+22), f1(ly), color)
		label := name
		if len(curves[i]) == 0 {
			label += " (no data)"
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" dominant-baseline="middle">%s</text>`+"\n", f1(lx+28), f1(ly), html.EscapeString(truncLabel(label, 28)))
	}
	fmt.Fprintf(b, `<text x="%s" y="%s" fill="#666" font-size="11">● max</text>`+"\n", f1(lx), f1(y0+10+float64(len(names))*22+6))
}

// niceSteps are the mantissas of axis bounds and grid lines.
var niceSteps = [...]float64{1, 2, 5, 10}

// niceFloor returns the largest 1, 2 or 5 times a power of ten at or below v > 0.
func niceFloor(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for i := len(niceSteps) - 1; i >= 0; i-- {
		if niceSteps[i]*e <= v*(1+1e-9) {
			return niceSteps[i] * e
		}
	}
	return e
}

// niceCeil returns the smallest 1, 2 or 5 times a power of ten at or above v > 0.
func niceCeil(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range niceSteps {
		if m*e >= v*(1-1e-9) {
			return m * e
		}
	}
	return 10 * e
}

// nines labels the x position of an HdrHistogram axis: 0 → "0%", 1 → "90%", 3 → "99.9%".
func nines(x float64) string {
	p := 100 * (1 - math.Pow(10, -x))
	return strconv.FormatFloat(math.Round(p*1e4)/1e4, 'f', -1, 64) + "%"
}

// axisMs labels a y grid line: "0.01", "0.5", "2", "100", "5k".
func axisMs(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func truncLabel(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// workloadSuffix names the workload in chart titles when all runs share one.
func workloadSuffix(runs []*Result) string {
	if len(runs) == 0 {
		return ""
	}
	name := runs[0].Workload.Name
	for _, r := range runs[1:] {
		if r.Workload.Name != name {
			return ""
		}
	}
	if name == "" {
		return ""
	}
	return " · " + name
}
