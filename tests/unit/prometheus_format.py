# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A strict reader of Prometheus's text exposition format for the tests of readiness.prom and of the node textfile:
the rules of https://prometheus.io/docs/instrumenting/exposition_formats/ (text format details) and of
https://prometheus.io/docs/concepts/data_model/ (metric and label names), checked line by line.  Python 3.6 and
later (the node textfile's tests run on EL8's Python too); prometheus_client's parser is the second opinion where
it is installed (requirements/dev.txt)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

METRIC_NAME = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*$')
LABEL_NAME = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*$')
# a label value: any character but a backslash, a double quote or a line feed, or one of the three escapes
LABEL_PAIR = re.compile(r'([^=,{}"\s]+)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"')
SAMPLE = re.compile(r'^([^{\s]+)(?:\{(.*)\})? (\S+)$')


def unescape(value):
    return re.sub(r'\\(.)', lambda m: {'\\': '\\', '"': '"', 'n': '\n'}[m.group(1)], value)


def parse_exposition(text):
    """{family: {'help', 'type', 'samples': [(labels dict, value)]}}, asserting the format's rules on the way."""
    assert text.endswith('\n'), 'the last line must end with a line feed'
    families = {}
    seen_series = set()
    for line in text[:-1].split('\n'):
        assert line == line.strip() and line, repr(line)
        if line.startswith('#'):
            parts = line.split(' ', 3)
            assert parts[1] in ('HELP', 'TYPE'), line
            name = parts[2]
            assert METRIC_NAME.match(name) and ':' not in name, name
            family = families.setdefault(name, {'help': None, 'type': None, 'samples': []})
            assert not family['samples'], 'HELP/TYPE of {0} after its samples'.format(name)
            if parts[1] == 'HELP':
                assert family['help'] is None, 'two HELP lines for ' + name
                assert re.match(r'^(?:[^\\\n]|\\\\|\\n)*$', parts[3]), 'HELP of {0} not escaped'.format(name)
                family['help'] = parts[3]
            else:
                assert family['type'] is None, 'two TYPE lines for ' + name
                assert parts[3] in ('counter', 'gauge', 'histogram', 'summary', 'untyped')
                family['type'] = parts[3]
            continue
        match = SAMPLE.match(line)
        assert match, line
        name, labels_text, value = match.groups()
        assert METRIC_NAME.match(name), name
        assert name in families and families[name]['type'], 'sample of {0} before its TYPE'.format(name)
        labels = {}
        if labels_text:
            pairs = LABEL_PAIR.findall(labels_text)
            assert ','.join('{0}="{1}"'.format(k, v) for k, v in pairs) == labels_text, labels_text
            for key, raw in pairs:
                assert LABEL_NAME.match(key) and not key.startswith('__'), key
                assert key not in labels, 'label {0} twice'.format(key)
                labels[key] = unescape(raw)
        float(value)
        series = (name, tuple(sorted(labels.items())))
        assert series not in seen_series, 'duplicate series {0}'.format(series)
        seen_series.add(series)
        families[name]['samples'].append((labels, float(value)))
    # a family's samples are together: a name's HELP/TYPE were seen before all of them (checked above), and no
    # other family's line comes between two of its samples
    order = [line.split('{')[0].split(' ')[0] for line in text.splitlines() if not line.startswith('#')]
    assert order == sorted(order, key=list(families).index)
    return families
