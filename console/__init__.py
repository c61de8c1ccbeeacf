"""The Quill ops console: a Django project (settings, urls, asgi) and its apps."""
