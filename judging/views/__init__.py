"""Server-rendered pages, thin: parse the request, call a service or a selector, render."""
