package com.alibaba.com.caucho.hessian.io.java8;

import java.io.Serializable;
import java.time.LocalDate;

/** The fields Dubbo's hessian-lite writes for a java.time.LocalDate (its class of this name). */
public class LocalDateHandle implements Serializable {
    private static final long serialVersionUID = 1L;
    private int year;
    private int month;
    private int day;

    public LocalDateHandle(LocalDate d) {
        year = d.getYear();
        month = d.getMonthValue();
        day = d.getDayOfMonth();
    }
}
