"""Server-rendered pages. Each page names the live channels it subscribes to
(`live_subs`); console.js patches cells by their data-k keys as deltas arrive."""
