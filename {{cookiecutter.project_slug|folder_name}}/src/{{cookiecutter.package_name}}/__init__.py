"{{ cookiecutter.description | escaped }}"

__version__ = "0.1.0"
