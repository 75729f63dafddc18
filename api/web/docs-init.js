// Swagger UI over this hub's /openapi.json, with try-it-out against the hub. The console's
// signed-in token (sessionStorage) is pre-authorized. Swagger UI 5 renders the OpenAPI 3.1
// document as it is.
"use strict";
fetch("/openapi.json").then(r => r.json()).then(doc => {
  const ui = SwaggerUIBundle({
    spec: doc,
    dom_id: "#swagger-ui",
    deepLinking: true,
    tryItOutEnabled: true,
    persistAuthorization: false,
  });
  const token = sessionStorage.getItem("suanpan-token");
  if (token) { ui.preauthorizeApiKey("bearer", token); }
  window.ui = ui;
});
