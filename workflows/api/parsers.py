from rest_framework.parsers import BaseParser


class YAMLTextParser(BaseParser):
    """A workflow spec posted as YAML text: the view receives the text itself (it may be a
    template that is not valid YAML until rendered)."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read().decode("utf-8", errors="replace")


class TextYAMLParser(YAMLTextParser):
    media_type = "text/yaml"


class XYAMLParser(YAMLTextParser):
    media_type = "application/x-yaml"
