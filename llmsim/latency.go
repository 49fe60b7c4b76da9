package llmsim

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in scenario files as a Go duration
// string ("250ms", "2.5s") or as a number of seconds (2.5).
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON accepts a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case float64:
		return d.set(strconv.FormatFloat(v, 'f', -1, 64), true)
	case string:
		return d.set(v, false)
	}
	return fmt.Errorf("expected a duration like \"1.5s\" or a number of seconds, got %s", b)
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML accepts a duration string or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error { return d.decodeScalar(n) }

func (d *Duration) decodeScalar(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a duration like \"1.5s\" or a number of seconds")
	}
	return d.set(n.Value, n.Tag == "!!int" || n.Tag == "!!float")
}

func (d *Duration) set(s string, number bool) error {
	s = strings.TrimSpace(s)
	if number {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("expected a duration, got %q", s)
		}
		if f < 0 {
			return fmt.Errorf("duration must not be negative, got %q", s)
		}
		*d = Duration(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		if f, ferr := strconv.ParseFloat(s, 64); ferr == nil {
			return d.set(strconv.FormatFloat(f, 'f', -1, 64), true)
		}
		return fmt.Errorf("expected a duration like \"1.5s\" or \"250ms\", got %q", s)
	}
	if v < 0 {
		return fmt.Errorf("duration must not be negative, got %q", s)
	}
	*d = Duration(v)
	return nil
}

// Dist names a latency distribution.
type Dist string

// The latency distributions.
const (
	// DistFixed is always Value.
	DistFixed Dist = "fixed"
	// DistUniform is uniform in [Min, Max].
	DistUniform Dist = "uniform"
	// DistNormal is normal with Mean and Stddev, cut at 0 and at Max when
	// set.
	DistNormal Dist = "normal"
	// DistLognormal is exp(N(ln Median, Sigma)), cut at Max when set.
	DistLognormal Dist = "lognormal"
)

var dists = []string{string(DistFixed), string(DistUniform), string(DistNormal), string(DistLognormal)}

// Latency is a fixed delay or a distribution of delays. In scenario files
// it is either a duration ("5s": fixed) or a mapping such as
// {dist: lognormal, median: 300ms, sigma: 0.4, max: 3s}. The zero value is
// a fixed zero delay.
type Latency struct {
	// Dist is the distribution; "" means fixed.
	Dist Dist `json:"dist,omitempty" yaml:"dist,omitempty"`
	// Value is the fixed delay.
	Value Duration `json:"value,omitempty" yaml:"value,omitempty"`
	// Min is the lower bound of uniform.
	Min Duration `json:"min,omitempty" yaml:"min,omitempty"`
	// Max is the upper bound of uniform and an optional cap of normal and
	// lognormal.
	Max Duration `json:"max,omitempty" yaml:"max,omitempty"`
	// Mean of normal.
	Mean Duration `json:"mean,omitempty" yaml:"mean,omitempty"`
	// Stddev of normal.
	Stddev Duration `json:"stddev,omitempty" yaml:"stddev,omitempty"`
	// Median of lognormal.
	Median Duration `json:"median,omitempty" yaml:"median,omitempty"`
	// Sigma is the shape of lognormal (standard deviation of the log).
	Sigma float64 `json:"sigma,omitempty" yaml:"sigma,omitempty"`
}

// Fixed returns a latency that is always d.
func Fixed(d time.Duration) Latency { return Latency{Value: Duration(d)} }

// IsZero reports whether l is the zero latency.
func (l Latency) IsZero() bool { return l == Latency{} }

func (l Latency) fixed() bool { return l.Dist == "" || l.Dist == DistFixed }

// Sample draws one delay from l using r; r may be nil for a fixed latency.
func (l Latency) Sample(r *rand.Rand) time.Duration {
	var d float64
	switch l.Dist {
	case "", DistFixed:
		return l.Value.D()
	case DistUniform:
		lo, hi := float64(l.Min), float64(l.Max)
		d = lo + r.Float64()*(hi-lo)
	case DistNormal:
		d = float64(l.Mean) + r.NormFloat64()*float64(l.Stddev)
	case DistLognormal:
		d = math.Exp(math.Log(float64(l.Median)) + r.NormFloat64()*l.Sigma)
	}
	if l.Max > 0 && d > float64(l.Max) {
		d = float64(l.Max)
	}
	if d < 0 || math.IsNaN(d) {
		d = 0
	}
	return time.Duration(d)
}

// String describes l ("5s", "lognormal(median=300ms, sigma=0.4)").
func (l Latency) String() string {
	switch l.Dist {
	case "", DistFixed:
		return l.Value.String()
	case DistUniform:
		return fmt.Sprintf("uniform(%s..%s)", l.Min, l.Max)
	case DistNormal:
		return fmt.Sprintf("normal(mean=%s, stddev=%s)", l.Mean, l.Stddev)
	case DistLognormal:
		return fmt.Sprintf("lognormal(median=%s, sigma=%g)", l.Median, l.Sigma)
	}
	return string(l.Dist)
}

func (l Latency) validate(field string, errs *errList) {
	switch l.Dist {
	case "", DistFixed:
	case DistUniform:
		if l.Max < l.Min {
			errs.add(join(field, "max"), "uniform needs max >= min (min %s, max %s)", l.Min, l.Max)
		}
	case DistNormal:
		if l.Mean <= 0 {
			errs.add(join(field, "mean"), "normal needs a positive mean")
		}
	case DistLognormal:
		if l.Median <= 0 {
			errs.add(join(field, "median"), "lognormal needs a positive median")
		}
		if l.Sigma < 0 || l.Sigma > 5 {
			errs.add(join(field, "sigma"), "lognormal sigma must be in [0, 5], got %v", l.Sigma)
		}
	default:
		errs.add(join(field, "dist"), "unknown distribution %q (one of %s)%s", l.Dist, strings.Join(dists, ", "), suggest(string(l.Dist), dists))
	}
}

// decodeScalar lets a bare duration stand for a fixed latency.
func (l *Latency) decodeScalar(n *yaml.Node) error {
	var d Duration
	if err := d.decodeScalar(n); err != nil {
		return err
	}
	*l = Latency{Value: d}
	return nil
}

// MarshalJSON writes a fixed latency as a duration string and a
// distribution as an object.
func (l Latency) MarshalJSON() ([]byte, error) {
	if l.fixed() {
		return json.Marshal(l.Value.String())
	}
	type plain Latency
	return json.Marshal(plain(l))
}

// UnmarshalJSON accepts what MarshalJSON writes.
func (l *Latency) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] != '{' {
		var d Duration
		if err := d.UnmarshalJSON(b); err != nil {
			return err
		}
		*l = Latency{Value: d}
		return nil
	}
	type plain Latency
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*l = Latency(p)
	return nil
}

// MarshalYAML writes a fixed latency as a duration string.
func (l Latency) MarshalYAML() (any, error) {
	if l.fixed() {
		return l.Value.String(), nil
	}
	type plain Latency
	return plain(l), nil
}

// UnmarshalYAML accepts a duration or a distribution mapping.
func (l *Latency) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return l.decodeScalar(n)
	}
	return decodeStrict(n, "", l)
}
