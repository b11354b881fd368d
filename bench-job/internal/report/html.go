package report

import (
	"encoding/base64"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"time"

	"sluice.dev/bench/internal/result"
)

// Render writes the plots and report.html into dir and returns the paths.
func Render(dir string, res *result.Result) ([]string, error) {
	figs, err := Plots(res)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range figs {
		p := filepath.Join(dir, f.Name)
		if err := os.WriteFile(p, f.PNG, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	p := filepath.Join(dir, "report.html")
	out, err := os.Create(p)
	if err != nil {
		return nil, err
	}
	if err := page(res).Execute(out, pageData(res, figs)); err != nil {
		out.Close()
		return nil, err
	}
	return append(paths, p), out.Close()
}

type figData struct {
	Title string
	Src   template.URL
}

type opRow struct {
	Name string
	*result.OpResult
}

func pageData(res *result.Result, figs []Figure) map[string]any {
	var fs []figData
	for _, f := range figs {
		fs = append(fs, figData{f.Title, template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(f.PNG))})
	}
	var rows []opRow
	for _, n := range result.OpNames(res.Ops) {
		rows = append(rows, opRow{n, res.Ops[n]})
	}
	return map[string]any{"R": res, "Ops": rows, "Figs": fs,
		"Started": time.UnixMilli(res.Start).UTC().Format(time.RFC3339), "Params": paramRows(res.Params)}
}

// page is self-contained: images are inlined, no scripts, no external CSS.
func page(res *result.Result) *template.Template {
	return template.Must(pageTemplate.Clone()).Funcs(template.FuncMap{
		"since": func(ms int64) string { return fmt.Sprintf("%.3f", float64(ms-res.Start)/1000) },
	})
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"since": func(int64) string { return "" }, // replaced per run by page
	// opt prints an optional time, or what its absence means.
	"opt": func(v *float64, absent string) string {
		if v == nil {
			return absent
		}
		return fmt.Sprintf("%.3f", *v)
	},
	"f":       func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"reasons": result.Reasons,
	"r":       func(v float64) string { return fmt.Sprintf("%.1f", v) },
}).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>sluice-bench: {{.R.Scenario}}</title>
<style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{white-space:nowrap}
td.text{text-align:left;overflow-wrap:anywhere;min-width:12em}th{background:#eee}td:first-child{text-align:left}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}
table.params th{text-align:left}.fail{color:#b00}.pass{color:#070}</style></head><body>
<h1>sluice-bench: {{.R.Scenario}}</h1>
<p>Target {{.R.Target}} &middot; started {{.Started}} &middot; {{r .R.Duration}} s &middot; {{.R.Pods}} pod(s)</p>
{{with .R.Verdict}}<p class="{{if .Pass}}pass{{else}}fail{{end}}">Thresholds: {{if .Pass}}PASS{{else}}FAIL {{range .Failures}}&middot; {{.}} {{end}}{{end}}</p>{{end}}
<h2>Operations</h2>
<table><tr><th>op</th><th>requests</th><th>ok</th><th>errors</th><th>req/s</th><th>mean ms</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>error reasons</th></tr>
{{range .Ops}}<tr><td>{{.Name}}</td><td>{{.Requests}}</td><td>{{.OK}}</td><td>{{.Failed}}</td><td>{{r .ReqsPerSec}}</td><td>{{f .Mean}}</td><td>{{f .P50}}</td><td>{{f .P90}}</td><td>{{f .P99}}</td><td>{{f .P999}}</td><td>{{f .Max}}</td><td class="text">{{reasons .Errors .RetryAfter}}</td></tr>
{{end}}</table>
{{with .R.Delivery}}<h2>Delivery</h2><table><tr><th>produced</th><th>consumed</th><th>unique</th><th>lost</th><th>duplicated</th><th>redelivered</th><th>e2e p50 ms</th><th>e2e p99 ms</th><th>exact</th></tr>
<tr><td>{{.Produced}}</td><td>{{.Consumed}}</td><td>{{.Unique}}</td><td>{{.Lost}}</td><td>{{.Duplicated}}</td><td>{{.Redelivered}}</td><td>{{f .E2E.P50}}</td><td>{{f .E2E.P99}}</td><td>{{.Exact}}</td></tr></table>{{end}}
{{if .R.Faults}}<h2>Faults</h2><p>Times in seconds after each fault; recovery is the first whole second after the last failed request at 90 % of the rate before the fault. A reason's Retry-After note counts its failed responses that carried the header and the delays they asked for (sluice-bench records it and does not wait it out). The plots mark each fault (dashed line) and shade its unavailability window.</p>
<table><tr><th>fault</th><th>at (s into the run)</th><th>first error</th><th>unavailable</th><th>recovered</th><th>req/s before</th><th>failures by reason</th></tr>
{{range .R.Faults}}<tr><td>{{.Name}}</td><td>{{since .At}}</td><td>{{opt .FirstError "none"}}</td><td>{{f .Unavailable}}</td><td>{{opt .Recovery "never"}}</td><td>{{r .BaselineRPS}}</td><td class="text">{{reasons .Errors .RetryAfter}}</td></tr>
{{end}}</table>{{end}}
{{if .R.Steps}}<h2>Steps</h2><table><tr><th>step</th><th>messages/s</th><th>duration s</th></tr>
{{range .R.Steps}}<tr><td>{{.Label}}</td><td>{{r .Messages}}</td><td>{{r .Duration}}</td></tr>{{end}}</table>{{end}}
{{if .R.Dropped}}<p>Open loop: {{.R.Dropped}} arrivals dropped (no idle worker at their start time).</p>{{end}}
<h2>Plots</h2>
<p>Throughput leaves out the first and last seconds when the load phase covers them only in part.</p>
{{range .Figs}}<h3>{{.Title}}</h3><img alt="{{.Title}}" src="{{.Src}}">{{end}}
<h2>Parameters</h2>
<table class="params">{{range .Params}}<tr><th>{{.Name}}</th><td class="text">{{.Value}}</td></tr>{{end}}</table>
</body></html>
`))
