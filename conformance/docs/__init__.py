"""The documentation site's generated pages (docs/, MkDocs): the requirement, profile and protocol references are
written from the code that defines them (the catalogue, the scenario records, the profile's JSON Schema, the fabric
protocols' OpenAPI document), so what the suite checks and what it reads cannot drift from what the site says."""
