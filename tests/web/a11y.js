// Basic accessibility facts of the current page, computed in the browser (returned as JSON).
() => {
  const parse = (c) => {
    const m = c.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const p = m[1].split(",").map((x) => parseFloat(x));
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0.5) return c;
    }
    return parse(getComputedStyle(document.body).backgroundColor);
  };
  const lowContrast = [];
  const selector = ".badge, .chip, a, .muted, p, td, th, dt, dd, li, h1, h2, h3, h4, label, button, summary, code";
  for (const el of document.querySelectorAll(selector)) {
    if (!el.offsetParent || !el.textContent.trim() || el.closest("svg") || el.closest(".hl")) continue;
    const style = getComputedStyle(el);
    const fg = parse(style.color), bg = background(el);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const large = parseFloat(style.fontSize) >= 24 || (parseFloat(style.fontSize) >= 18.5 && parseInt(style.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) lowContrast.push(`${el.tagName}.${el.className}: ${ratio.toFixed(2)} "${el.textContent.trim().slice(0, 30)}"`);
  }
  const unlabelled = [...document.querySelectorAll("input:not([type=hidden]), select, textarea")]
    .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby"))
    .map((el) => el.id || el.name);
  return {
    main: document.querySelectorAll("main").length,
    h1: document.querySelectorAll("h1").length,
    banner: document.querySelectorAll("body > header").length,
    navsUnlabelled: [...document.querySelectorAll("nav")].filter((n) => !n.getAttribute("aria-label")).length,
    lang: document.documentElement.lang,
    imagesWithoutAlt: [...document.querySelectorAll("img")].filter((i) => !i.hasAttribute("alt")).length,
    unlabelled,
    lowContrast: lowContrast.slice(0, 20),
  };
}
