// The voice page's script is inline in index.html (one file, no build step).
