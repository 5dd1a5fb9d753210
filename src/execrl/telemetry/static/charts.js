// Small canvas line charts for the execrl monitor: no dependencies, nothing fetched from a CDN.
// One LineChart per card: axes with "nice" ticks, raw series drawn faint with an EMA-smoothed line on
// top, alarm markers as vertical dashed lines, NaN/Inf marked with a cross, and a crosshair that all
// charts share (hovering one highlights the same step everywhere).
"use strict";

const Charts = (() => {
  const PAD = { left: 52, right: 14, top: 12, bottom: 26 };

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // Tick values in [lo, hi] at 1/2/5 x 10^k spacing, about `count` of them.
  function ticks(lo, hi, count) {
    const span = hi - lo;
    if (!(span > 0)) return [lo];
    const raw = span / Math.max(1, count);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return out;
  }

  // Compact number formatting: 12.3k, 0.0342, 1.2e-5.
  function fmt(v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "string") return v;
    if (!isFinite(v)) return String(v);
    const a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    if (a >= 100) return v.toFixed(0);
    if (a >= 1) return v.toFixed(2).replace(/\.?0+$/, "");
    if (a >= 1e-3) return v.toPrecision(3).replace(/\.?0+$/, "");
    return v.toExponential(1);
  }

  // Exponential moving average with start-up debiasing (as TensorBoard's smoothing slider).
  function smooth(points, weight) {
    if (!(weight > 0)) return points;
    let last = 0, n = 0;
    return points.map(([x, y]) => {
      if (y === null) return [x, null];
      last = last * weight + (1 - weight) * y;
      n += 1;
      return [x, last / (1 - Math.pow(weight, n))];
    });
  }

  class LineChart {
    constructor(card, opts) {
      this.card = card;
      this.opts = opts || {};
      this.canvas = card.querySelector("canvas");
      this.series = [];
      this.alarms = [];
      this.xDomain = [0, 1];
      this.hover = null;
      this.canvas.addEventListener("mousemove", (ev) => this.opts.onHover(this.stepAt(ev), ev));
      this.canvas.addEventListener("mouseleave", () => this.opts.onHover(null, null));
    }

    setData(series, alarms, xDomain, smoothing) {
      this.series = series;
      this.alarms = alarms;
      this.xDomain = xDomain;
      this.smoothing = smoothing;
      this.card.classList.toggle("is-empty", !series.some((s) => s.points.length));
    }

    yDomain() {
      if (this.opts.range) return this.opts.range;
      let lo = Infinity, hi = -Infinity;
      for (const s of this.series) for (const [, y] of s.points) {
        if (y !== null) { lo = Math.min(lo, y); hi = Math.max(hi, y); }
      }
      if (!isFinite(lo)) return [0, 1];
      if (lo === hi) { const d = Math.abs(lo) * 0.1 || 1; return [lo - d, hi + d]; }
      const pad = (hi - lo) * 0.08;
      return [lo >= 0 && lo - pad < 0 ? 0 : lo - pad, hi + pad];
    }

    frame() {
      const w = this.canvas.clientWidth, h = this.canvas.clientHeight;
      const [x0, x1] = this.xDomain, [y0, y1] = this.yDomain();
      const pw = w - PAD.left - PAD.right, ph = h - PAD.top - PAD.bottom;
      return {
        w, h, y0, y1,
        sx: (x) => PAD.left + (x1 > x0 ? ((x - x0) / (x1 - x0)) * pw : pw / 2),
        sy: (y) => PAD.top + ph - ((y - y0) / (y1 - y0)) * ph,
        inv: (px) => x0 + ((px - PAD.left) / pw) * (x1 - x0),
      };
    }

    stepAt(ev) {
      const rect = this.canvas.getBoundingClientRect();
      return Math.round(this.frame().inv(ev.clientX - rect.left));
    }

    draw() {
      const dpr = window.devicePixelRatio || 1;
      const w = this.canvas.clientWidth, h = this.canvas.clientHeight;
      if (!w || !h) return;
      if (this.canvas.width !== Math.round(w * dpr)) this.canvas.width = Math.round(w * dpr);
      if (this.canvas.height !== Math.round(h * dpr)) this.canvas.height = Math.round(h * dpr);
      const ctx = this.canvas.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, h);
      const f = this.frame();
      this.drawAxes(ctx, f);
      this.drawAlarms(ctx, f);
      for (const s of this.series) this.drawSeries(ctx, f, s);
      this.drawHover(ctx, f);
    }

    drawAxes(ctx, f) {
      ctx.font = "11px " + cssVar("--font");
      ctx.lineWidth = 1;
      ctx.fillStyle = cssVar("--muted");
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      for (const t of ticks(f.y0, f.y1, 4)) {
        const y = Math.round(f.sy(t)) + 0.5;
        ctx.strokeStyle = cssVar("--grid");
        ctx.beginPath(); ctx.moveTo(PAD.left, y); ctx.lineTo(f.w - PAD.right, y); ctx.stroke();
        ctx.fillText(fmt(t), PAD.left - 8, y);
      }
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      const [x0, x1] = this.xDomain;
      for (const t of ticks(x0, x1, Math.max(2, Math.floor(f.w / 90)))) {
        if (t !== Math.round(t)) continue;
        const x = Math.round(f.sx(t)) + 0.5;
        ctx.strokeStyle = cssVar("--axis");
        ctx.beginPath(); ctx.moveTo(x, f.h - PAD.bottom); ctx.lineTo(x, f.h - PAD.bottom + 4); ctx.stroke();
        ctx.fillText(fmt(t), x, f.h - PAD.bottom + 7);
      }
      ctx.strokeStyle = cssVar("--axis");
      ctx.beginPath();
      ctx.moveTo(PAD.left + 0.5, PAD.top); ctx.lineTo(PAD.left + 0.5, f.h - PAD.bottom + 0.5);
      ctx.lineTo(f.w - PAD.right, f.h - PAD.bottom + 0.5);
      ctx.stroke();
    }

    drawAlarms(ctx, f) {
      ctx.save();
      ctx.setLineDash([4, 3]);
      for (const a of this.alarms) {
        const x = Math.round(f.sx(a.step)) + 0.5;
        ctx.globalAlpha = a.hit ? 0.95 : 0.35;
        ctx.strokeStyle = cssVar("--alarm");
        ctx.beginPath(); ctx.moveTo(x, PAD.top); ctx.lineTo(x, f.h - PAD.bottom); ctx.stroke();
        ctx.fillStyle = cssVar("--alarm");
        ctx.beginPath(); ctx.moveTo(x - 4, PAD.top); ctx.lineTo(x + 4, PAD.top); ctx.lineTo(x, PAD.top + 6); ctx.fill();
      }
      ctx.restore();
    }

    drawLine(ctx, f, points, width, alpha, color) {
      ctx.save();
      ctx.globalAlpha = alpha;
      ctx.strokeStyle = color;
      ctx.lineWidth = width;
      ctx.lineJoin = "round";
      ctx.beginPath();
      let pen = false;
      for (const [x, y] of points) {
        if (y === null) { pen = false; continue; }
        const px = f.sx(x), py = f.sy(Math.min(f.y1, Math.max(f.y0, y)));
        if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
        pen = true;
      }
      ctx.stroke();
      if (points.length === 1 && points[0][1] !== null) {
        ctx.fillStyle = color;
        ctx.beginPath(); ctx.arc(f.sx(points[0][0]), f.sy(points[0][1]), 3, 0, 2 * Math.PI); ctx.fill();
      }
      ctx.restore();
    }

    drawSeries(ctx, f, s) {
      const smoothed = smooth(s.points, this.smoothing);
      if (this.smoothing > 0) this.drawLine(ctx, f, s.points, 1, 0.28, s.color);
      this.drawLine(ctx, f, smoothed, 2, 1, s.color);
      ctx.strokeStyle = cssVar("--alarm");
      ctx.lineWidth = 2;
      for (const [x, y, bad] of s.points) {
        if (y !== null || !bad) continue;
        const px = f.sx(x), py = PAD.top + 10;
        ctx.beginPath(); ctx.moveTo(px - 4, py - 4); ctx.lineTo(px + 4, py + 4);
        ctx.moveTo(px + 4, py - 4); ctx.lineTo(px - 4, py + 4); ctx.stroke();
      }
    }

    drawHover(ctx, f) {
      if (this.hover === null) return;
      const x = Math.round(f.sx(this.hover)) + 0.5;
      if (x < PAD.left || x > f.w - PAD.right) return;
      ctx.strokeStyle = cssVar("--crosshair");
      ctx.lineWidth = 1;
      ctx.beginPath(); ctx.moveTo(x, PAD.top); ctx.lineTo(x, f.h - PAD.bottom); ctx.stroke();
      for (const s of this.series) {
        const p = nearest(s.points, this.hover);
        if (!p || p[1] === null) continue;
        ctx.fillStyle = s.color;
        ctx.beginPath(); ctx.arc(f.sx(p[0]), f.sy(p[1]), 3.5, 0, 2 * Math.PI); ctx.fill();
      }
    }
  }

  // The point whose step is closest to `step` (points are sorted by step).
  function nearest(points, step) {
    let lo = 0, hi = points.length - 1;
    if (hi < 0) return null;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (points[mid][0] < step) lo = mid + 1; else hi = mid;
    }
    if (lo > 0 && Math.abs(points[lo - 1][0] - step) <= Math.abs(points[lo][0] - step)) lo -= 1;
    return points[lo];
  }

  return { LineChart, fmt, nearest, smooth };
})();
