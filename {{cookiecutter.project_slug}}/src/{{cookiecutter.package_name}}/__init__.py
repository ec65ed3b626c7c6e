{{ cookiecutter.description | quoted }}

__version__ = "0.1.0"
