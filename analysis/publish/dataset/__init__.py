"""The published dataset: which runs the paper uses, the datapackage and its codebook, validation, the
versioned archive, contributed runs coming in (intake) and going out (contribute), the run history page."""
