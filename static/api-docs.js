// Starts the vendored Swagger UI on /api/docs over the board's OpenAPI document (the URL is
// read from the page; nothing here builds HTML).
(function () {
  "use strict";
  var holder = document.getElementById("swagger-ui");
  if (!holder || !window.SwaggerUIBundle) return;
  window.SwaggerUIBundle({
    url: holder.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    // no validator badge: it would ask an outside server to check the document
    validatorUrl: null,
  });
})();
