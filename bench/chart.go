package bench

import (
	"fmt"
	"image/color"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/durable-llm/durable-llm/llmsim"
)

var (
	incidentColor = color.RGBA{R: 255, G: 200, B: 200, A: 255}
	arrivalColor  = color.RGBA{R: 31, G: 90, B: 180, A: 255}
	offeredColor  = color.RGBA{R: 60, G: 60, B: 60, A: 255}
)

// WriteStormChart writes a PNG with one panel per contender: upstream
// arrivals per 100 ms over time (all models), the offered calls per 100 ms
// (dashed) and the incident window (shaded). Every panel has the same axes.
func WriteStormChart(path string, r *StormReport) error {
	c := r.Case
	xmax := c.Duration.Seconds()
	ymax := c.Rate * llmsim.BucketWidth.Seconds()
	for _, run := range r.Runs {
		for _, b := range run.Stats.Buckets {
			xmax = max(xmax, float64(b.StartMS+llmsim.BucketWidth.Milliseconds())/1000)
			ymax = max(ymax, float64(b.Arrivals))
		}
	}
	ymax *= 1.08
	plots := make([][]*plot.Plot, len(r.Runs))
	for i, run := range r.Runs {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s — amplification %.2f over the incident, %.2f overall", run.Name, run.Summary.AmpIncident, run.Summary.AmpOverall)
		p.Title.TextStyle.Font.Size = vg.Points(10)
		p.Y.Label.Text = "arrivals / 100 ms"
		if i == len(r.Runs)-1 {
			p.X.Label.Text = "seconds since the start of the run"
		}
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, xmax, 0, ymax
		p.Add(plotter.NewGrid())

		shade, err := plotter.NewPolygon(plotter.XYs{
			{X: c.IncidentStart.Seconds(), Y: 0}, {X: c.IncidentEnd.Seconds(), Y: 0},
			{X: c.IncidentEnd.Seconds(), Y: ymax}, {X: c.IncidentStart.Seconds(), Y: ymax},
		})
		if err != nil {
			return err
		}
		shade.Color, shade.LineStyle.Width = incidentColor, 0
		p.Add(shade)

		pts := make(plotter.XYs, 0, 2*len(run.Stats.Buckets))
		for _, b := range run.Stats.Buckets {
			x := float64(b.StartMS) / 1000
			pts = append(pts, plotter.XY{X: x, Y: float64(b.Arrivals)}, plotter.XY{X: x + llmsim.BucketWidth.Seconds(), Y: float64(b.Arrivals)})
		}
		if len(pts) > 0 {
			l, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			l.LineStyle.Color, l.LineStyle.Width = arrivalColor, vg.Points(0.6)
			p.Add(l)
		}
		offered, err := plotter.NewLine(plotter.XYs{{X: 0, Y: c.Rate / 10}, {X: c.Duration.Seconds(), Y: c.Rate / 10}})
		if err != nil {
			return err
		}
		offered.LineStyle.Color, offered.LineStyle.Dashes = offeredColor, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(offered)
		if i == 0 {
			p.Legend.Add("upstream arrivals", mustLine(pts))
			p.Legend.Add("offered calls", offered)
			p.Legend.Add("incident", shade)
			p.Legend.Top = true
			p.Legend.TextStyle.Font.Size = vg.Points(8)
		}
		plots[i] = []*plot.Plot{p}
	}
	const w = 22 * vg.Centimeter
	h := vg.Length(len(r.Runs)) * 5 * vg.Centimeter
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(r.Runs), Cols: 1, PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 2 * vg.Millimeter, PadY: 2 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func mustLine(pts plotter.XYs) plot.Thumbnailer {
	if len(pts) == 0 {
		pts = plotter.XYs{{}}
	}
	l, _ := plotter.NewLine(pts)
	l.LineStyle.Color, l.LineStyle.Width = arrivalColor, vg.Points(0.6)
	return l
}

// streamColors are the contenders' colours in the streaming chart.
var streamColors = []color.Color{
	color.RGBA{R: 60, G: 60, B: 60, A: 255},
	color.RGBA{R: 31, G: 90, B: 180, A: 255},
	color.RGBA{R: 214, G: 110, B: 20, A: 255},
}

// WriteStreamChart writes a PNG of the time to first token of every
// streamed call, one line per contender in call order, with llmsim's own
// time to first token (the same schedule for every contender) dashed.
func WriteStreamChart(path string, r *StreamReport) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Time to first token of a %d-token streamed answer, sequential calls", r.Options.Tokens)
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.X.Label.Text = "call"
	p.Y.Label.Text = "time to first token (ms)"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	for k, row := range r.Rows {
		var pts plotter.XYs
		for i, c := range row.Calls {
			if c.Err == nil {
				pts = append(pts, plotter.XY{X: float64(i + 1), Y: float64(c.TTFT) / float64(time.Millisecond)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.LineStyle.Color, l.LineStyle.Width = streamColors[k%len(streamColors)], vg.Points(1)
		sc.Color, sc.Radius = streamColors[k%len(streamColors)], vg.Points(1.5)
		p.Add(l, sc)
		p.Legend.Add(row.Name, l, sc)
	}
	var up plotter.XYs
	if len(r.Rows) > 0 {
		for i, c := range r.Rows[0].Calls {
			if c.Upstream > 0 {
				up = append(up, plotter.XY{X: float64(i + 1), Y: float64(c.Upstream) / float64(time.Millisecond)})
			}
		}
	}
	if len(up) > 0 {
		l, err := plotter.NewLine(up)
		if err != nil {
			return err
		}
		l.LineStyle.Color, l.LineStyle.Dashes = offeredColor, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("llmsim's time to first token (schedule)", l)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p.Save(20*vg.Centimeter, 10*vg.Centimeter, path)
}
