// The task page's live tail: each server-sent line is appended as text
// (textContent, never markup), the oldest dropped past 500 lines.
(function () {
  "use strict";
  var box = document.getElementById("live-tail");
  if (!box || !window.EventSource) { return; }
  var stream = new EventSource(box.getAttribute("data-src"));
  function add(text, kind) {
    var line = document.createElement("div");
    line.className = kind;
    line.textContent = text;
    box.appendChild(line);
    while (box.childNodes.length > 500) { box.removeChild(box.firstChild); }
  }
  stream.onmessage = function (event) { add(event.data, "line"); };
  stream.addEventListener("end", function (event) { add(event.data, "end"); stream.close(); });
}());
