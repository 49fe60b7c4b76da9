package uicheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns the path of a Chromium (or Chrome) binary: $CHROMIUM when
// it names an executable, else the first of chromium, chromium-browser,
// google-chrome and google-chrome-stable on PATH; "" when there is none.
func Chromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// Options configure Start. Zero values mean defaults.
type Options struct {
	// Path of the browser binary; default Chromium().
	Path string
	// Width and Height of the window in CSS pixels; default 1440×1000.
	Width, Height int
	// UserDataDir is the profile directory; default a temporary directory
	// removed by Close.
	UserDataDir string
	// Timeout bounds each single step (navigate, evaluate, screenshot);
	// default 30 s. WaitText has its own timeout.
	Timeout time.Duration
}

// Browser is one headless Chromium process with one tab. It is not safe for
// concurrent use.
type Browser struct {
	ctx     context.Context
	cancel  func()
	timeout time.Duration
	tmpDir  string
}

// Start launches the browser and opens its tab.
func Start(o Options) (*Browser, error) {
	if o.Path == "" {
		o.Path = Chromium()
	}
	if o.Path == "" {
		return nil, errors.New("uicheck: no Chromium found (install the chromium package, or set CHROMIUM)")
	}
	if o.Width <= 0 {
		o.Width = 1440
	}
	if o.Height <= 0 {
		o.Height = 1000
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	b := &Browser{timeout: o.Timeout}
	if o.UserDataDir == "" {
		dir, err := os.MkdirTemp("", "uicheck-profile-")
		if err != nil {
			return nil, err
		}
		o.UserDataDir, b.tmpDir = dir, dir
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(o.Path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(o.UserDataDir),
		chromedp.WindowSize(o.Width, o.Height),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	b.ctx = ctx
	b.cancel = func() { cancelTab(); cancelAlloc() }
	// The first action starts the browser; it must not run under a
	// timeout (that would bound the browser's life), so the start is
	// watched from outside.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.EmulateViewport(int64(o.Width), int64(o.Height))) }()
	select {
	case err := <-started:
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("uicheck: start %s: %w", o.Path, err)
		}
	case <-time.After(60 * time.Second):
		b.Close()
		return nil, fmt.Errorf("uicheck: %s did not start within 60s", o.Path)
	}
	return b, nil
}

// Close stops the browser and removes its temporary profile.
func (b *Browser) Close() {
	b.cancel()
	if b.tmpDir != "" {
		_ = os.RemoveAll(b.tmpDir)
	}
}

func (b *Browser) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, b.timeout)
}

// Open navigates the tab to url and waits for the page's load event.
func (b *Browser) Open(url string) error {
	ctx, cancel := b.step()
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		return fmt.Errorf("uicheck: open %s: %w", url, err)
	}
	return nil
}

// Eval evaluates a JavaScript expression in the page and decodes its value
// (JSON-compatible) into out; out may be nil.
func (b *Browser) Eval(expr string, out any) error {
	ctx, cancel := b.step()
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string]("JSON.stringify((() => "+expr+")() ?? null)", chromedp.EvalAwaitPromise))
	if err != nil {
		return fmt.Errorf("uicheck: evaluate %q: %w", abbrev(expr, 80), err)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal([]byte(raw), out)
}

// Text returns the rendered text (innerText) of the elements that match
// the CSS selector css, one per line; css "" means the whole page. It is ""
// when nothing matches.
func (b *Browser) Text(css string) (string, error) {
	if css == "" {
		css = "body"
	}
	q, _ := json.Marshal(css)
	var s string
	err := b.Eval(`Array.from(document.querySelectorAll(`+string(q)+`)).map(e => e.innerText).join("\n")`, &s)
	return s, err
}

// WaitText polls the text of the elements that match css ("" : the whole
// page) until it contains every string of want, and returns that text. On
// timeout the error lists the missing strings and the text the page did
// show, so a failure explains itself.
func (b *Browser) WaitText(css string, timeout time.Duration, want ...string) (string, error) {
	deadline := time.Now().Add(timeout)
	where := "the page"
	if css != "" {
		where = css
	}
	for {
		text, err := b.Text(css)
		missing := Missing(text, want...)
		if err == nil && len(missing) == 0 {
			return text, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return text, fmt.Errorf("uicheck: text of %s not readable after %v: %w", where, timeout, err)
			}
			if text == "" {
				page, _ := b.Text("")
				return text, fmt.Errorf("uicheck: after %v nothing matches %s; the page shows:\n%s", timeout, where, page)
			}
			return text, fmt.Errorf("uicheck: after %v %s still lacks %q; it shows:\n%s", timeout, where, missing, text)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Missing returns the strings of want that text does not contain.
func Missing(text string, want ...string) []string {
	var missing []string
	for _, w := range want {
		if !strings.Contains(text, w) {
			missing = append(missing, w)
		}
	}
	return missing
}

// ClickText clicks the first visible button, link, tab or option whose own
// text (or aria-label, or title) equals label, ignoring case and
// surrounding space, and reports whether one was found.
func (b *Browser) ClickText(label string) (bool, error) {
	q, _ := json.Marshal(strings.ToLower(strings.TrimSpace(label)))
	expr := `(() => {
	  const want = ` + string(q) + `;
	  const norm = s => (s || "").replace(/\s+/g, " ").trim().toLowerCase();
	  const els = document.querySelectorAll('button, a, [role=button], [role=tab], [role=option], [role=menuitem], [role=switch], label, summary');
	  for (const el of els) {
	    const r = el.getBoundingClientRect();
	    if (r.width === 0 && r.height === 0) continue;
	    if (norm(el.innerText) === want || norm(el.getAttribute('aria-label')) === want || norm(el.getAttribute('title')) === want) {
	      el.scrollIntoView({block: 'center'});
	      el.click();
	      return true;
	    }
	  }
	  return false;
	})()`
	var ok bool
	err := b.Eval(expr, &ok)
	return ok, err
}

// Screenshot returns a PNG of the whole page. Pages that scroll inside a
// container (as the Temporal Web UI does) are not taller than the window,
// so the window first grows to the height of the tallest scrolled content
// (at most 8000 px), and returns to its size afterwards.
func (b *Browser) Screenshot() ([]byte, error) {
	var size struct{ W, H, Full int }
	err := b.Eval(`(() => {
	  let full = document.documentElement.scrollHeight;
	  for (const el of document.querySelectorAll('*')) {
	    const s = getComputedStyle(el);
	    if ((s.overflowY === 'auto' || s.overflowY === 'scroll') && el.clientHeight > 0.5 * window.innerHeight) {
	      full = Math.max(full, el.scrollHeight + (window.innerHeight - el.clientHeight));
	    }
	  }
	  return {W: window.innerWidth, H: window.innerHeight, Full: Math.ceil(full)};
	})()`, &size)
	if err != nil {
		return nil, err
	}
	ctx, cancel := b.step()
	defer cancel()
	grown := size.Full > size.H && size.W > 0
	if grown {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(size.W), int64(min(size.Full, 8000)))); err != nil {
			return nil, fmt.Errorf("uicheck: resize for screenshot: %w", err)
		}
		time.Sleep(time.Second) // let the page lay itself out again
		defer func() { _ = chromedp.Do(ctx, chromedp.EmulateViewport(int64(size.W), int64(size.H))) }()
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return nil, fmt.Errorf("uicheck: screenshot: %w", err)
	}
	return png, nil
}

// ViewportScreenshot is a PNG of the window as it is, for pages whose
// scrolling panes would make Screenshot's full page mostly empty.
func (b *Browser) ViewportScreenshot() ([]byte, error) {
	ctx, cancel := b.step()
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return nil, fmt.Errorf("uicheck: screenshot: %w", err)
	}
	return png, nil
}

func abbrev(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
