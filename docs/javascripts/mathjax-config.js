// MathJax settings for pymdownx.arithmatex (generic mode): typeset only what arithmatex marked.
// Loaded before javascripts/mathjax/tex-chtml.js, which the site serves itself (no CDN).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};
