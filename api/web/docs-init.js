// Swagger UI over this hub's /openapi.json, with try-it-out against the hub. The console's
// signed-in token (sessionStorage) is pre-authorized. The bundled Swagger UI (4.x) renders
// OpenAPI 3.0 only, so the 3.1 document is shown under a 3.0 label; the schemas it uses
// (JSON Schema types, anyOf with null) render the same.
"use strict";
fetch("/openapi.json").then(r => r.json()).then(doc => {
  doc.openapi = "3.0.3";
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
