#!/usr/bin/env bash
# Vendor MathJax into docs/javascripts/mathjax/ so the site renders its maths offline (no CDN).
# Takes the tex-chtml component (TeX in, HTML+CSS out; base, AMS and newcommand built in) and the
# woff-v2 fonts it loads from beside itself, plus the licence, from the npm package of the pinned version.
set -euo pipefail
VERSION=3.2.2
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "mathjax@$VERSION" >/dev/null && tar xzf "mathjax-$VERSION.tgz")
target=docs/javascripts/mathjax
rm -rf "$target"
mkdir -p "$target/output/chtml/fonts"
cp "$work/package/es5/tex-chtml.js" "$work/package/LICENSE" "$target/"
cp -r "$work/package/es5/output/chtml/fonts/woff-v2" "$target/output/chtml/fonts/"
echo "MathJax $VERSION (npm package mathjax, es5/tex-chtml.js and its woff-v2 fonts; Apache-2.0, see LICENSE)" > "$target/VERSION"
du -sh "$target"
