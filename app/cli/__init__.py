"""The `kernelwiki` command line (`main`) and its `toolchains` commands: the top floor of app/."""
